-- Every source measured for that kernel (or bundle): one pooled figure each, best first, per
-- device and bundle; with the Triton and torch its measurement identity names (a source
-- re-measured after an upgrade is two rows: before and after).
SELECT e.*, v.triton_version, v.torch_version
FROM source_estimates e
LEFT JOIN (SELECT DISTINCT measurement_key, triton_version, torch_version FROM proj_runs) v
    ON v.measurement_key = e.measurement_key
WHERE e.kernel_id = $kernel OR e.entry_point = $kernel OR e.kernel_file = $kernel OR starts_with(e.bundle_digest, $digest)
ORDER BY e.device_kind, e.bundle_digest, e.pooled_speedup DESC, e.source_hash, v.triton_version
