-- Store schema v3 -> v4, in its own transaction (tlxstore/store/schema.py: upgrade): what the
-- views read of the payloads, projected, so no view parses `events` (docs/STORE.md, "Performance of
-- the report queries"). The new columns and tables are filled for the events already projected
-- (pos NULL: a v1 store's, or below projected_pos); those not yet projected are left to the next
-- pass, as ever. The new tables are filled by project.sql's own statements for them, over the
-- temporary table `unprojected` made here (schema.upgrade runs them after this file).
-- run_heads.last_event_at is filled from every stored event (ingest keeps it from then on).
ALTER TABLE run_heads ADD COLUMN last_event_at TIMESTAMPTZ;
UPDATE run_heads SET last_event_at = l.last_event_at
FROM (SELECT run_id, max(recorded_at) AS last_event_at FROM events GROUP BY run_id) l
WHERE l.run_id = run_heads.run_id;

CREATE OR REPLACE TEMPORARY TABLE unprojected AS
SELECT run_id, seq, recorded_at, type, payload FROM events
WHERE type IN ('RunStarted', 'CandidateProposed', 'RunFinished', 'FinalistRevalidated', 'DecisionMade', 'ModelExchanged')
  AND (pos IS NULL OR pos < (SELECT projected_pos FROM projection_state));

ALTER TABLE proj_runs ADD COLUMN architecture VARCHAR;
ALTER TABLE proj_runs ADD COLUMN num_sms INTEGER;
ALTER TABLE proj_runs ADD COLUMN tlxdb_version VARCHAR;
ALTER TABLE proj_runs ADD COLUMN cuda_version VARCHAR;
ALTER TABLE proj_runs ADD COLUMN resumed_from VARCHAR;
ALTER TABLE proj_runs ADD COLUMN kernel_file VARCHAR;
ALTER TABLE proj_runs ADD COLUMN kernel_stem VARCHAR;
UPDATE proj_runs SET architecture = s.p.device.architecture, num_sms = s.p.device.num_sms,
    tlxdb_version = s.p.tool_versions.tlxdb, cuda_version = s.p.tool_versions.cuda, resumed_from = s.p.resumed_from,
    kernel_file = regexp_extract(proj_runs.kernel_path, '([^/\\]+[/\\][^/\\]+|[^/\\]+)$', 1),
    kernel_stem = regexp_extract(proj_runs.kernel_path, '([^/\\]+)\.py$', 1)
FROM (
    SELECT run_id, from_json(payload, '{"device": {"architecture": "VARCHAR", "num_sms": "INTEGER"},
        "tool_versions": {"tlxdb": "VARCHAR", "cuda": "VARCHAR"}, "resumed_from": "VARCHAR"}') AS p
    FROM unprojected WHERE type = 'RunStarted'
) s
WHERE s.run_id = proj_runs.run_id;

ALTER TABLE proj_candidates ADD COLUMN change VARCHAR;
ALTER TABLE proj_candidates ADD COLUMN evidence VARCHAR;
ALTER TABLE proj_candidates ADD COLUMN expected_effect VARCHAR;
ALTER TABLE proj_candidates ADD COLUMN risk VARCHAR;
ALTER TABLE proj_candidates ADD COLUMN tokens_in BIGINT;
ALTER TABLE proj_candidates ADD COLUMN tokens_out BIGINT;
ALTER TABLE proj_candidates ADD COLUMN cost_usd DOUBLE;
ALTER TABLE proj_candidates ADD COLUMN replays VARCHAR;
UPDATE proj_candidates SET change = n.p.change, evidence = n.p.evidence, expected_effect = n.p.expected_effect,
    risk = n.p.risk, tokens_in = n.p.tokens_in, tokens_out = n.p.tokens_out, cost_usd = n.p.cost_usd,
    replays = coalesce(n.p.remeasures, n.p.replays)  -- CandidateProposed v2 renamed it remeasures
FROM (
    SELECT run_id, seq, from_json(payload, '{"change": "VARCHAR", "evidence": "VARCHAR", "expected_effect": "VARCHAR",
        "risk": "VARCHAR", "tokens_in": "BIGINT", "tokens_out": "BIGINT", "cost_usd": "DOUBLE", "replays": "VARCHAR",
        "remeasures": "VARCHAR"}') AS p
    FROM unprojected WHERE type = 'CandidateProposed'
) n
WHERE n.run_id = proj_candidates.run_id AND n.seq = proj_candidates.seq;

CREATE TABLE proj_finishes (
    run_id VARCHAR NOT NULL,
    seq BIGINT NOT NULL,
    finished_at TIMESTAMPTZ NOT NULL,
    stopping_reason VARCHAR,
    success BOOLEAN,
    winner_id VARCHAR,
    speedup DOUBLE,
    detail VARCHAR
);
CREATE TABLE proj_revalidations (
    run_id VARCHAR NOT NULL,
    candidate_id VARCHAR,
    seq BIGINT NOT NULL,
    recorded_at TIMESTAMPTZ NOT NULL,
    survived BOOLEAN,
    reason VARCHAR,
    speedup DOUBLE,
    ci_low DOUBLE,
    ci_high DOUBLE,
    alternations INTEGER
);
CREATE TABLE proj_case_speedups (
    run_id VARCHAR NOT NULL,
    candidate_id VARCHAR,
    stage VARCHAR NOT NULL,
    case_id VARCHAR,
    weight DOUBLE,
    baseline_median_us DOUBLE,
    candidate_median_us DOUBLE,
    speedup DOUBLE,
    baseline_p95_us DOUBLE,
    candidate_p95_us DOUBLE,
    baseline_cv DOUBLE,
    candidate_cv DOUBLE,
    event_seq BIGINT NOT NULL
);
CREATE TABLE proj_exchanges (
    run_id VARCHAR NOT NULL,
    seq BIGINT NOT NULL,
    tokens_in BIGINT,
    tokens_out BIGINT,
    cost_usd DOUBLE
);
-- one row per baseline proposed (candidate_id 'baseline'): the entry point its source names (the
-- first @triton.jit function; '' when none, NULL when its source is not stored), for run_identity
CREATE TABLE proj_baselines (
    run_id VARCHAR NOT NULL,
    seq BIGINT NOT NULL,
    source_hash VARCHAR,
    entry_point VARCHAR
);
UPDATE tlxdb_meta SET value = '4' WHERE key = 'store_schema_version';
