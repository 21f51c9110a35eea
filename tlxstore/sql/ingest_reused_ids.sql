-- A fresh event whose id the store already holds at another (run, seq). The integer keys are
-- matched first over the one id_key column; the texts are read only for rows whose key matched.
WITH hits AS MATERIALIZED (
    SELECT id_key FROM events WHERE id_key IN (SELECT tlx_key(event_id) FROM fresh)
)
SELECT e.event_id, e.run_id, e.seq
FROM events e
WHERE e.id_key IN (SELECT id_key FROM hits) AND e.event_id IN (SELECT event_id FROM fresh)
LIMIT 1
