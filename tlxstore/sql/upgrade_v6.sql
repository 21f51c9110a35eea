-- Store schema v5 -> v6, in its own transaction (tlxstore/store/schema.py: upgrade):
-- measurement windows and notes (BenchmarkSampled, DecisionMade and FinalistRevalidated v2). A
-- v5 store was written by a tlxdb that recorded neither: its samples were measured alone
-- (window_id NULL) and no decision has notes.
ALTER TABLE proj_samples ADD COLUMN window_id VARCHAR;
CREATE TABLE proj_notes (
    run_id VARCHAR NOT NULL,
    candidate_id VARCHAR,
    stage VARCHAR NOT NULL,
    event_seq BIGINT NOT NULL,
    note_index INTEGER NOT NULL,
    note VARCHAR NOT NULL
);
UPDATE tlxdb_meta SET value = '6' WHERE key = 'store_schema_version';
