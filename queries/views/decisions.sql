-- Every decision with the candidate's hypothesis. measured: the decision rests on a full
-- measurement of the source (as the loop recorded it); notes: what qualified it (a case noisier
-- than max_cv, decided on its interval).
SELECT
    d.run_id,
    d.candidate_id,
    d.outcome,
    d.reason,
    d.speedup AS decided_speedup,
    d.ci_low,
    d.ci_high,
    d.compared_to,
    d.measured,
    coalesce(n.notes, []) AS notes,
    d.decided_at,
    c.hypothesis,
    c.round
FROM proj_decisions d
LEFT JOIN proj_candidates c ON c.cand_key = d.cand_key AND c.run_id = d.run_id AND c.candidate_id = d.candidate_id
LEFT JOIN (
    SELECT run_id, event_seq, list(note ORDER BY note_index) AS notes FROM proj_notes WHERE stage = 'decision'
    GROUP BY run_id, event_seq
) n ON n.run_id = d.run_id AND n.event_seq = d.seq
