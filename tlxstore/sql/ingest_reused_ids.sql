-- A fresh event whose id the store already holds at another (run, seq).
SELECT e.event_id, e.run_id, e.seq FROM events e SEMI JOIN fresh f ON e.event_id = f.event_id LIMIT 1
