-- The earliest decided candidate (not itself a duplicate) whose raw or normalized source hash
-- matches, under one measurement identity; a raw match is preferred over a normalized one.
-- One table (decisions carry their candidate's identity); integer keys narrow the scan and the
-- texts are compared too.
SELECT
    run_id,
    candidate_id,
    source_hash,
    CASE WHEN source_hash = $source_hash THEN 'raw' ELSE 'normalized' END AS match,
    outcome,
    speedup,
    reason
FROM proj_decisions
WHERE (source_key = tlx_key($source_hash) OR norm_key = tlx_key($normalized_hash))
  AND mk_key = tlx_key($measurement_key)
  AND measurement_key = $measurement_key
  AND (source_hash = $source_hash OR normalized_hash = $normalized_hash)
  AND outcome <> 'duplicate'
ORDER BY (source_hash = $source_hash) DESC, proposed_at, seq
LIMIT 1
