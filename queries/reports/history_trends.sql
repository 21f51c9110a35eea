-- Baseline and best per case over time, per device.
SELECT * FROM trends
WHERE kernel_id = $kernel OR starts_with(bundle_digest, $digest) OR kernel_id LIKE $kernel || ' @ %' OR kernel_id LIKE '% @ ' || $kernel
ORDER BY device_kind, started_at, case_id
