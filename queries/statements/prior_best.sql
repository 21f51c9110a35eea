-- Promoted non-baseline candidates of other runs under one measurement identity, best first.
-- The inner scan reads only the integer key and yields row ids.
SELECT run_id, candidate_id, source_hash, knobs, outcome, speedup, reason, hypothesis
FROM proj_decisions
WHERE rowid IN (SELECT rowid FROM proj_decisions WHERE mk_key = tlx_key($measurement_key))
  AND measurement_key = $measurement_key
  AND outcome = 'promoted' AND speedup IS NOT NULL AND round > 0 AND run_id <> $exclude_run
ORDER BY speedup DESC, run_id, candidate_id
LIMIT $limit
