-- Run by queries/replica.py over the rows whose integer key matches (found in its index); the
-- texts are compared here, so a key collision cannot give a wrong answer.
-- Every decided non-baseline candidate under one measurement identity, in any run, oldest first,
-- with its last decision. Decisions carry their candidate's identity, so one table answers.
SELECT run_id, candidate_id, source_hash, knobs, outcome, speedup, ci_low, ci_high, reason, hypothesis
FROM proj_decisions
WHERE measurement_key = $measurement_key AND round > 0
QUALIFY row_number() OVER (PARTITION BY run_id, candidate_id ORDER BY seq DESC) = 1
ORDER BY proposed_at, run_id, seq
