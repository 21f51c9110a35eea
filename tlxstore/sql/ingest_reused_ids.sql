-- A fresh event whose id the store already holds at another (run, seq): integer keys first.
SELECT e.event_id, e.run_id, e.seq
FROM (SELECT event_id, run_id, seq FROM events WHERE id_key IN (SELECT tlx_key(event_id) FROM fresh)) e
SEMI JOIN fresh f ON f.event_id = e.event_id
LIMIT 1
