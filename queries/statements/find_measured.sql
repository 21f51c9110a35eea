-- Run by queries/replica.py over the rows whose integer key matches (found in its index); the
-- texts are compared here, so a key collision cannot give a wrong answer.
-- The earliest measured candidate (decided on a full measurement, not a duplicate) whose raw or
-- normalized source hash matches, under one measurement identity; a raw match is preferred over
-- a normalized one. A candidate cut short by an infrastructure failure is not measured.
-- Decisions carry their candidate's identity, so one table answers.
SELECT
    run_id,
    candidate_id,
    source_hash,
    CASE WHEN source_hash = $source_hash THEN 'raw' ELSE 'normalized' END AS match,
    outcome,
    speedup,
    ci_low,
    ci_high,
    reason
FROM proj_decisions
WHERE measurement_key = $measurement_key
  AND (source_hash = $source_hash OR normalized_hash = $normalized_hash)
  AND outcome <> 'duplicate'
  AND measured
ORDER BY (source_hash = $source_hash) DESC, proposed_at, seq
LIMIT 1
