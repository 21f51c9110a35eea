-- Incoming events whose (run, seq) slot holds another id, or the same id with other bytes; each
-- with both records, so the caller can tell a real conflict from an older version's encoding.
SELECT
    t.run_id,
    t.seq,
    t.new_id,
    t.stored_id,
    {'event_id': e.event_id, 'run_id': e.run_id, 'seq': e.seq, 'recorded_at_us': epoch_us(e.recorded_at),
     'type': e.type, 'schema_version': e.schema_version, 'payload': e.payload} AS stored,
    {'event_id': i.event_id, 'run_id': i.run_id, 'seq': i.seq, 'recorded_at_us': epoch_us(i.recorded_at),
     'type': i.type, 'schema_version': i.schema_version, 'payload': i.payload} AS offered
FROM taken t
JOIN events e ON e.run_id = t.run_id AND e.seq = t.seq
JOIN incoming i ON i.run_id = t.run_id AND i.seq = t.seq
WHERE t.new_id <> t.stored_id OR NOT t.same_body
ORDER BY t.run_id, t.seq
