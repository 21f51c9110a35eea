-- Store schema v7 -> v8, in its own transaction (tlxstore/store/schema.py: upgrade): what
-- each run was given beside its identity, the cases' parameters (RunStarted v3) and the runs it
-- named with --prior-run, which nearest_history reads. The new table is filled by project.sql's
-- own statement for it over the RunStarted events already projected (schema.upgrade runs it after
-- this file); a v7 store's runs recorded no parameters (NULL: unknown).
CREATE TABLE proj_run_inputs (
    run_id VARCHAR NOT NULL,
    case_parameters JSON,
    prior_runs VARCHAR[]
);
CREATE OR REPLACE TEMPORARY TABLE unprojected AS
SELECT run_id, seq, recorded_at, type, payload FROM events
WHERE type = 'RunStarted' AND (pos IS NULL OR pos < (SELECT projected_pos FROM projection_state));
-- "replay" names only re-deciding a run from its events: the recorded candidate a proposal
-- measures again is `remeasures` (CandidateProposed v2; project.sql reads either key).
ALTER TABLE proj_candidates RENAME COLUMN replays TO remeasures;
UPDATE tlxdb_meta SET value = '8' WHERE key = 'store_schema_version';
