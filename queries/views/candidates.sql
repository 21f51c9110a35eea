-- One row per proposed candidate, with its (last) decision; outcome NULL while undecided.
SELECT
    c.run_id,
    c.candidate_id,
    c.round,
    c.parent_id,
    c.provider,
    c.hypothesis,
    c.hypothesis_kind,
    c.source_hash,
    c.normalized_hash,
    c.measurement_key,
    c.knobs,
    c.proposed_at,
    d.outcome,
    d.reason,
    d.speedup,
    d.ci_low,
    d.ci_high,
    d.decided_at
FROM proj_candidates c
LEFT JOIN (
    SELECT * FROM proj_decisions
    QUALIFY row_number() OVER (PARTITION BY run_id, candidate_id ORDER BY seq DESC) = 1
) d ON d.cand_key = c.cand_key AND d.run_id = c.run_id AND d.candidate_id = c.candidate_id
