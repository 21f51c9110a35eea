-- Append the fresh events (Arrow table `incoming`, or its copy without the stored ones), each with
-- its place in the store's order (pos), and advance the run heads; the projections follow in
-- project.sql, over the events from projection_state.projected_pos on.
INSERT INTO events
SELECT f.event_id, f.run_id, f.seq, f.recorded_at, f.type, f.schema_version, f.payload, tlx_id_key(f.event_id),
       s.next_pos + row_number() OVER () - 1
FROM fresh f, projection_state s;

UPDATE projection_state SET next_pos = next_pos + (SELECT count(*) FROM fresh);

-- each run's new head and the latest time it was heard of (greatest skips NULL: a new run)
CREATE OR REPLACE TEMPORARY TABLE heads AS
SELECT f.run_id, max(f.seq) + 1 AS next_seq, greatest(max(f.recorded_at), any_value(h.last_event_at)) AS last_event_at
FROM fresh f LEFT JOIN run_heads h ON h.run_id = f.run_id
GROUP BY f.run_id;
DELETE FROM run_heads WHERE run_id IN (SELECT run_id FROM heads);
INSERT INTO run_heads SELECT run_id, next_seq, last_event_at FROM heads;
DROP TABLE heads;
