-- The best ever per kernel x bundle x device of the kernel (or bundle) asked for.
SELECT * FROM kernel_history
WHERE kernel_id = $kernel OR entry_point = $kernel OR kernel_file = $kernel OR starts_with(bundle_digest, $digest)
ORDER BY kernel_id, device_kind, bundle_digest
