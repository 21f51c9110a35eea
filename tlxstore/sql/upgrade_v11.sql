-- Store schema v10 -> v11, in its own transaction (tlxstore/store/schema.py: upgrade): a run's
-- kernel (run_identity's entry_point, and so its kernel_id) is the first @triton.jit function its
-- baseline's source launches, else its first (macros.sql: tlx_kernel_name), no longer always its
-- first: a @triton.jit helper defined above the kernel named the runs of a new user's matmul. The
-- baselines already projected are projected again by project.sql's own statement (schema.upgrade
-- runs it after this file), over the proposals already projected.
DELETE FROM proj_baselines;
CREATE OR REPLACE TEMPORARY TABLE unprojected AS
SELECT run_id, seq, recorded_at, type, payload FROM events
WHERE type = 'CandidateProposed' AND (pos IS NULL OR pos < (SELECT projected_pos FROM projection_state));
UPDATE tlxdb_meta SET value = '11' WHERE key = 'store_schema_version';
