-- Store schema v2 -> v3, in its own transaction (tlxstore/store/schema.py: upgrade):
-- proj_failures and proj_decisions.measured, filled for the events already projected (those not
-- yet projected are left to the next pass, as ever).
CREATE TABLE proj_failures (
    run_id VARCHAR NOT NULL,
    candidate_id VARCHAR NOT NULL,
    seq BIGINT NOT NULL,
    cand_key BIGINT NOT NULL
);
INSERT INTO proj_failures
SELECT run_id, p.candidate_id, seq, tlx_key(run_id || '/' || p.candidate_id)
FROM (
    SELECT run_id, seq, from_json(payload, '{"candidate_id": "VARCHAR", "retryable": "BOOLEAN"}') AS p
    FROM events
    WHERE type = 'InfrastructureFailed' AND (pos IS NULL OR pos < (SELECT projected_pos FROM projection_state))
)
WHERE p.retryable AND p.candidate_id IS NOT NULL;
ALTER TABLE proj_decisions ADD COLUMN measured BOOLEAN;
UPDATE proj_decisions SET measured = NOT EXISTS (
    SELECT 1 FROM proj_failures f
    WHERE f.cand_key = proj_decisions.cand_key AND f.run_id = proj_decisions.run_id
      AND f.candidate_id = proj_decisions.candidate_id AND f.seq < proj_decisions.seq
);
UPDATE tlxdb_meta SET value = '3' WHERE key = 'store_schema_version';
