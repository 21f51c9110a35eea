-- The events of some runs in record form, for export.
SELECT event_id, run_id, seq, recorded_at, type, schema_version, payload
FROM events
WHERE list_contains($run_ids, run_id)
ORDER BY run_id, seq
