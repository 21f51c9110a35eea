-- Exclusion signatures counted within their scope: one row per kernel, bundle, device kind,
-- signature and outcome, with how often and in how many runs it was recorded and the latest reason.
SELECT
    kernel_id,
    bundle_digest,
    device_kind,
    signature,
    outcome,
    count(*) AS occurrences,
    count(DISTINCT run_id) AS runs,
    max_by(reason, run_id || '/' || lpad(CAST(event_seq AS VARCHAR), 12, '0')) AS last_reason
FROM exclusions
GROUP BY kernel_id, bundle_digest, device_kind, signature, outcome
