-- Every decided non-baseline candidate under one measurement identity, in any run, oldest first,
-- with its last decision.
SELECT
    c.run_id,
    c.candidate_id,
    c.source_hash,
    c.knobs,
    d.outcome,
    d.speedup,
    d.reason,
    c.hypothesis
FROM proj_candidates c
JOIN (
    SELECT * FROM proj_decisions
    QUALIFY row_number() OVER (PARTITION BY run_id, candidate_id ORDER BY seq DESC) = 1
) d ON d.run_id = c.run_id AND d.candidate_id = c.candidate_id
WHERE c.measurement_key = $measurement_key AND c.round > 0
ORDER BY c.proposed_at, c.run_id, c.seq
