-- Run by queries/replica.py over the rows whose integer key matches (found in its index); the
-- texts are compared here, so a key collision cannot give a wrong answer.
-- The earliest decided candidate (not itself a duplicate) whose raw or normalized source hash
-- matches, under one measurement identity; a raw match is preferred over a normalized one.
-- Decisions carry their candidate's identity, so one table answers.
SELECT
    run_id,
    candidate_id,
    source_hash,
    CASE WHEN source_hash = $source_hash THEN 'raw' ELSE 'normalized' END AS match,
    outcome,
    speedup,
    reason
FROM proj_decisions
WHERE measurement_key = $measurement_key
  AND (source_hash = $source_hash OR normalized_hash = $normalized_hash)
  AND outcome <> 'duplicate'
ORDER BY (source_hash = $source_hash) DESC, proposed_at, seq
LIMIT 1
