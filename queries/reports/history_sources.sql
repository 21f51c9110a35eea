-- Every source measured for that kernel (or bundle): one pooled figure each, best first, per
-- device and bundle.
SELECT * FROM source_estimates
WHERE kernel_id = $kernel OR entry_point = $kernel OR kernel_file = $kernel OR starts_with(bundle_digest, $kernel)
ORDER BY device_kind, bundle_digest, pooled_speedup DESC, source_hash
