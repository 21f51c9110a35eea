-- Append the fresh events (Arrow table `incoming`, or its copy without the stored ones), each with
-- its place in the store's order (pos), and advance the run heads; the projections follow in
-- project.sql, over the events from projection_state.projected_pos on.
INSERT INTO events
SELECT f.event_id, f.run_id, f.seq, f.recorded_at, f.type, f.schema_version, f.payload, tlx_id_key(f.event_id),
       s.next_pos + row_number() OVER () - 1
FROM fresh f, projection_state s;

UPDATE projection_state SET next_pos = next_pos + (SELECT count(*) FROM fresh);

DELETE FROM run_heads WHERE run_id IN (SELECT run_id FROM fresh);
INSERT INTO run_heads SELECT run_id, max(seq) + 1 FROM fresh GROUP BY run_id;
