-- Run by queries/replica.py over the rows whose integer key matches (found in its index); the
-- texts are compared here, so a key collision cannot give a wrong answer.
-- Exclusions for one bundle and device kind, grouped by signature and outcome across runs; the
-- reason and hypothesis are the latest recorded (run ids sort by start time).
SELECT
    signature,
    outcome,
    max_by(reason, run_id || '/' || lpad(CAST(seq AS VARCHAR), 12, '0')) AS reason,
    max_by(hypothesis, run_id || '/' || lpad(CAST(seq AS VARCHAR), 12, '0')) AS hypothesis,
    count(*) AS occurrences
FROM proj_exclusions
WHERE bundle_digest = $bundle_digest AND device_kind = $device_kind
GROUP BY signature, outcome
ORDER BY occurrences DESC, signature, outcome
