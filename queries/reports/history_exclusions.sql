-- What was refused for it, by bundle and device.
SELECT * FROM excluded_signatures
WHERE kernel_id = $kernel OR starts_with(bundle_digest, $digest) OR kernel_id LIKE $kernel || ' @ %' OR kernel_id LIKE '% @ ' || $kernel
ORDER BY occurrences DESC, signature
