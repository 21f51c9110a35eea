-- Every run of that kernel (or bundle), oldest first.
SELECT * FROM runs
WHERE kernel_id = $kernel OR entry_point = $kernel OR kernel_file = $kernel OR starts_with(bundle_digest, $digest)
ORDER BY started_at, run_id
