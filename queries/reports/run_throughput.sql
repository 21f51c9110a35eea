-- Declared work beside measured medians: the roofline's points.
SELECT * FROM throughput WHERE run_id = $run_id AND (bytes_moved IS NOT NULL OR flops IS NOT NULL)
