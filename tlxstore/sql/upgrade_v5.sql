-- Store schema v4 -> v5, in its own transaction (tlxstore/store/schema.py: upgrade):
-- proj_run_candidates, filled for what is already projected by project.sql's own statements for
-- it (schema.upgrade runs them after this file) over the temporary tables they read, made here:
-- `unprojected` holds a CandidateProposed row for each stored candidate (the counts), `decided`
-- every stored decision (the promoted candidates). What is not yet projected is left to the next
-- pass, as ever.
CREATE TABLE proj_run_candidates (
    run_id VARCHAR NOT NULL,
    candidates BIGINT NOT NULL,
    promoted STRUCT(candidate_id VARCHAR, speedup DOUBLE)[],
    best_candidate_id VARCHAR,
    best_speedup DOUBLE
);
CREATE OR REPLACE TEMPORARY TABLE unprojected AS  -- no payload: every candidate counts, the
SELECT run_id, 'CandidateProposed' AS type, NULL::VARCHAR AS payload  -- baseline too, until v12
FROM proj_candidates;
CREATE OR REPLACE TEMPORARY TABLE decided AS
SELECT run_id, candidate_id, seq, outcome, speedup, source_key FROM proj_decisions;
UPDATE tlxdb_meta SET value = '5' WHERE key = 'store_schema_version';
