-- Every run of that kernel (or bundle), oldest first, with its winner's one pooled estimate
-- (source_estimates: every measurement of that source in any run), not the run's own figure.
-- The estimates are filtered by the kernel as the runs are, so only this kernel's are computed.
WITH e AS (
    SELECT * FROM source_estimates
    WHERE kernel_id = $kernel OR entry_point = $kernel OR kernel_file = $kernel OR starts_with(bundle_digest, $digest)
)
SELECT
    r.*,
    e.pooled_speedup AS winner_pooled_speedup,
    e.ci_low AS winner_pooled_ci_low,
    e.ci_high AS winner_pooled_ci_high,
    e.measurements AS winner_measurements
FROM runs r
LEFT JOIN run_identity i ON i.run_id = r.run_id
LEFT JOIN e ON e.kernel_id = r.kernel_id AND e.measurement_key = r.measurement_key
    AND e.baseline_source_hash = i.baseline_source_hash AND e.source_hash = r.winner_source_hash
WHERE r.kernel_id = $kernel OR r.entry_point = $kernel OR r.kernel_file = $kernel OR starts_with(r.bundle_digest, $digest)
ORDER BY r.started_at, r.run_id
