-- A fresh event whose id the store already holds at another (run, seq): the integer keys and the
-- ids matched in one join. DuckDB passes the min and max of the batch's keys to the scan of
-- `events`, which then skips every block whose keys lie outside them; ids from new_event_id have
-- keys that grow with time (tlx_id_key), so a live batch reads only the newest blocks.
SELECT e.event_id, e.run_id, e.seq
FROM events e
SEMI JOIN (SELECT tlx_id_key(event_id) AS k, event_id FROM fresh) f ON e.id_key = f.k AND e.event_id = f.event_id
LIMIT 1
