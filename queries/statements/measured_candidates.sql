-- Every decided non-baseline candidate under one measurement identity, in any run, oldest first,
-- with its last decision. The inner scan reads only the integer key and yields row ids; decisions
-- carry their candidate's identity, so one table answers.
SELECT run_id, candidate_id, source_hash, knobs, outcome, speedup, reason, hypothesis
FROM proj_decisions
WHERE rowid IN (SELECT rowid FROM proj_decisions WHERE mk_key = tlx_key($measurement_key))
  AND measurement_key = $measurement_key AND round > 0
QUALIFY row_number() OVER (PARTITION BY run_id, candidate_id ORDER BY seq DESC) = 1
ORDER BY proposed_at, run_id, seq
