-- Store schema v8 -> v9, in its own transaction (tlxstore/store/schema.py: upgrade): which
-- build of a source a benchmark call measured (BenchmarkSampled v3, MachineSampled v2 `instance`:
-- a second window measures several instances of each member, optimizer/evaluation/window.py), so
-- that the views tell the instances of one candidate in one window apart. Every event projected
-- before names its instance in its payload, or measured the first.
ALTER TABLE proj_samples ADD COLUMN instance INTEGER;
ALTER TABLE proj_machine ADD COLUMN instance INTEGER;
UPDATE proj_samples SET instance = coalesce((
    SELECT CAST(e.payload ->> 'instance' AS INTEGER) FROM events e
    WHERE e.run_id = proj_samples.run_id AND e.seq = proj_samples.event_seq), 1);
UPDATE proj_machine SET instance = coalesce((
    SELECT CAST(e.payload ->> 'instance' AS INTEGER) FROM events e
    WHERE e.run_id = proj_machine.run_id AND e.seq = proj_machine.event_seq), 1);
UPDATE tlxdb_meta SET value = '9' WHERE key = 'store_schema_version';
