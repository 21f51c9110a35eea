-- Every decision with the candidate's hypothesis.
SELECT
    d.run_id,
    d.candidate_id,
    d.outcome,
    d.reason,
    d.speedup AS decided_speedup,
    d.ci_low,
    d.ci_high,
    d.compared_to,
    d.decided_at,
    c.hypothesis,
    c.round
FROM proj_decisions d
LEFT JOIN proj_candidates c ON c.cand_key = d.cand_key AND c.run_id = d.run_id AND c.candidate_id = d.candidate_id
