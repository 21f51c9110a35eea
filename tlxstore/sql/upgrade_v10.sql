-- Store schema v9 -> v10, in its own transaction (tlxstore/store/schema.py: upgrade): what a
-- decision's interval carried of instances (DecisionMade v3: the run's estimate of how far
-- instances of one source run apart, its degrees of freedom, each pair of instances' speedup), as
-- columns of proj_decisions. A v9 store's decisions are v2 or older and recorded none (NULL; their
-- notes say it in words), unless a newer tlxdb wrote v3 events into it: those are read from the
-- payloads.
ALTER TABLE proj_decisions ADD COLUMN instance_df INTEGER;
ALTER TABLE proj_decisions ADD COLUMN instance_sigma DOUBLE;
ALTER TABLE proj_decisions ADD COLUMN instance_pairs DOUBLE[];
UPDATE proj_decisions SET
    instance_df = CAST(e.payload ->> 'instance_df' AS INTEGER),
    instance_sigma = CAST(e.payload ->> 'instance_sigma' AS DOUBLE),
    instance_pairs = CAST(e.payload -> 'instance_pairs' AS DOUBLE[])
FROM events e
WHERE e.run_id = proj_decisions.run_id AND e.seq = proj_decisions.seq
    AND e.type = 'DecisionMade' AND e.schema_version >= 3;
UPDATE tlxdb_meta SET value = '10' WHERE key = 'store_schema_version';
