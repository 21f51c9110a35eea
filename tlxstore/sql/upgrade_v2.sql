-- Store schema v1 -> v2, in its own transaction (tlxstore/store/schema.py: upgrade). A v1 store projected every
-- event as it came: its events keep pos NULL (never in a pass's range) and all count as projected.
ALTER TABLE events ADD COLUMN pos BIGINT;
CREATE TABLE projection_state (next_pos BIGINT NOT NULL, projected_pos BIGINT NOT NULL, catch_ups BIGINT NOT NULL);
INSERT INTO projection_state VALUES (0, 0, 0);
-- v1 keyed every id by tlx_key; v2 keys ids shaped as UUIDv7 by their own bits (tlx_id_key). A v1
-- store holds such ids only if something other than tlxdb made them; their keys are redone.
UPDATE events SET id_key = tlx_id_key(event_id) WHERE id_key <> tlx_id_key(event_id);
UPDATE tlxdb_meta SET value = '2' WHERE key = 'store_schema_version';
