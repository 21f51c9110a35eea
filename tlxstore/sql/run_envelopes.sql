SELECT event_id, run_id, seq, epoch_us(recorded_at) AS recorded_at_us, type, schema_version, payload
FROM events WHERE run_id = $run_id ORDER BY seq
