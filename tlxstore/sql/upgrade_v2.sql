-- Store schema v1 -> v2, in the upgrading transaction (Store._upgrade). A v1 store projected every
-- event as it came: its events keep pos NULL (never in a pass's range) and all count as projected.
ALTER TABLE events ADD COLUMN pos BIGINT;
CREATE TABLE projection_state (next_pos BIGINT NOT NULL, projected_pos BIGINT NOT NULL, catch_ups BIGINT NOT NULL);
INSERT INTO projection_state VALUES (0, 0, 0);
UPDATE tlxdb_meta SET value = '2' WHERE key = 'store_schema_version';
