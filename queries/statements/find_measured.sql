-- The earliest decided candidate (not itself a duplicate) whose raw or normalized source hash
-- matches, under one measurement identity; a raw match is preferred over a normalized one.
SELECT
    c.run_id,
    c.candidate_id,
    c.source_hash,
    CASE WHEN c.source_hash = $source_hash THEN 'raw' ELSE 'normalized' END AS match,
    d.outcome,
    d.speedup,
    d.reason
FROM (
    SELECT run_id, candidate_id, source_hash, proposed_at
    FROM proj_candidates
    WHERE measurement_key = $measurement_key
      AND (source_hash = $source_hash OR normalized_hash = $normalized_hash)
) c
JOIN proj_decisions d ON d.run_id = c.run_id AND d.candidate_id = c.candidate_id
WHERE d.outcome <> 'duplicate'
ORDER BY (c.source_hash = $source_hash) DESC, c.proposed_at, d.seq
LIMIT 1
