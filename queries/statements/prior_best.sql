-- Promoted non-baseline candidates of other runs under one measurement identity, best first.
SELECT
    c.run_id,
    c.candidate_id,
    c.source_hash,
    c.knobs,
    d.outcome,
    d.speedup,
    d.reason,
    c.hypothesis
FROM proj_decisions d
JOIN proj_candidates c ON c.run_id = d.run_id AND c.candidate_id = d.candidate_id
WHERE c.measurement_key = $measurement_key
  AND d.run_id <> $exclude_run
  AND c.round > 0
  AND d.outcome = 'promoted'
  AND d.speedup IS NOT NULL
ORDER BY d.speedup DESC, c.run_id, c.candidate_id
LIMIT $limit
