-- Run by queries/replica.py over the rows whose integer key matches (found in its index); the
-- texts are compared here, so a key collision cannot give a wrong answer.
-- Promoted non-baseline candidates of other runs under one measurement identity, best first.
SELECT run_id, candidate_id, source_hash, knobs, outcome, speedup, ci_low, ci_high, reason, hypothesis
FROM proj_decisions
WHERE measurement_key = $measurement_key
  AND outcome = 'promoted' AND speedup IS NOT NULL AND round > 0 AND run_id <> $exclude_run
ORDER BY speedup DESC, run_id, candidate_id
LIMIT $limit
