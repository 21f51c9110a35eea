-- The store's tables (store schema version 7). Created once, in one transaction, by the first writer.
-- `events` is the truth (one row per event, record form, payload as JSON text); the proj_* tables
-- are projections of it, brought up to date through `projection_state.projected_pos` (Store.project:
-- in the ingest's own transaction for a small batch, by the next reader after a large one). *_key columns
-- are tlx_key() of the text beside them (macros.sql): integer keys for fast scans and joins.
-- No PRIMARY KEY / UNIQUE: DuckDB's ART indexes make every checkpoint rewrite them (seconds on
-- millions of rows); uniqueness is enforced by Store.ingest under the exclusive store lock.

CREATE TABLE tlxdb_meta (key VARCHAR NOT NULL, value VARCHAR NOT NULL);

CREATE TABLE events (
    event_id VARCHAR NOT NULL,
    run_id VARCHAR NOT NULL,
    seq BIGINT NOT NULL,
    recorded_at TIMESTAMPTZ NOT NULL,
    type VARCHAR NOT NULL,
    schema_version INTEGER NOT NULL,
    payload VARCHAR NOT NULL USING COMPRESSION zstd,  -- JSON text (validated by the codec before it gets here)
    id_key BIGINT NOT NULL,
    pos BIGINT  -- the order events entered the store, dense from 0; NULL for those a v1 store held
);

-- One row. next_pos: the pos the next ingested event gets. projected_pos: every event below it is in
-- the proj_* tables, none at or above it. catch_ups: how many projection passes have committed.
CREATE TABLE projection_state (next_pos BIGINT NOT NULL, projected_pos BIGINT NOT NULL, catch_ups BIGINT NOT NULL);
INSERT INTO projection_state VALUES (0, 0, 0);

-- next expected seq per run: the gapless-sequence check and the event count; last_event_at: the
-- latest recorded_at of the run's events (when it was last heard of)
CREATE TABLE run_heads (run_id VARCHAR NOT NULL, next_seq BIGINT NOT NULL, last_event_at TIMESTAMPTZ);

CREATE TABLE proj_runs (
    run_id VARCHAR NOT NULL,
    started_at TIMESTAMPTZ NOT NULL,
    host VARCHAR,
    device_kind VARCHAR,
    backend VARCHAR,
    provider VARCHAR,
    model VARCHAR,
    kernel_path VARCHAR,
    kernel_sha256 VARCHAR,
    bundle_digest VARCHAR,
    measurement_key VARCHAR,
    output_dir VARCHAR,
    label VARCHAR,
    triton_version VARCHAR,
    torch_version VARCHAR,
    architecture VARCHAR,
    num_sms INTEGER,
    tlxdb_version VARCHAR,
    cuda_version VARCHAR,
    resumed_from VARCHAR,
    kernel_file VARCHAR,  -- the kernel file and the folder holding it (run_identity)
    kernel_stem VARCHAR  -- the kernel file's name without .py: the entry point when no baseline names one
);

-- what a run was given beside its identity (store schema v8), read by nearest_history
CREATE TABLE proj_run_inputs (
    run_id VARCHAR NOT NULL,
    case_parameters JSON,  -- case id -> its parameters (RunStarted v3; NULL before: not recorded)
    prior_runs VARCHAR[]  -- the runs named with --prior-run
);

CREATE TABLE proj_candidates (
    run_id VARCHAR NOT NULL,
    candidate_id VARCHAR NOT NULL,
    seq BIGINT NOT NULL,
    proposed_at TIMESTAMPTZ NOT NULL,
    round INTEGER NOT NULL,
    parent_id VARCHAR,
    provider VARCHAR,
    hypothesis VARCHAR,
    hypothesis_kind VARCHAR,
    source_hash VARCHAR NOT NULL,
    normalized_hash VARCHAR NOT NULL,
    measurement_key VARCHAR,
    knobs JSON,
    cand_key BIGINT NOT NULL,  -- tlx_key(run_id || '/' || candidate_id)
    mk_key BIGINT,
    source_key BIGINT NOT NULL,
    norm_key BIGINT NOT NULL,
    change VARCHAR,
    evidence VARCHAR,
    expected_effect VARCHAR,
    risk VARCHAR,
    tokens_in BIGINT,
    tokens_out BIGINT,
    cost_usd DOUBLE,
    remeasures VARCHAR  -- the recorded run/candidate it measures again (`replays` before v8)
);

-- one row per decision, carrying its candidate's identity (hashes, measurement key, hypothesis),
-- so the per-candidate lookups read one table
CREATE TABLE proj_decisions (
    run_id VARCHAR NOT NULL,
    candidate_id VARCHAR NOT NULL,
    seq BIGINT NOT NULL,
    decided_at TIMESTAMPTZ NOT NULL,
    outcome VARCHAR NOT NULL,
    reason VARCHAR,
    speedup DOUBLE,
    ci_low DOUBLE,
    ci_high DOUBLE,
    compared_to VARCHAR,
    cand_key BIGINT NOT NULL,
    round INTEGER,
    proposed_at TIMESTAMPTZ,
    hypothesis VARCHAR,
    knobs JSON,
    source_hash VARCHAR,
    normalized_hash VARCHAR,
    measurement_key VARCHAR,
    source_key BIGINT,
    norm_key BIGINT,
    mk_key BIGINT,
    -- the decision was reached on a full measurement (DecisionMade.measured, as the loop recorded
    -- it; for a v1 decision: no retryable infrastructure failure of the candidate came before it)
    measured BOOLEAN,
    -- store schema v10: what the interval carried of instances (DecisionMade v3; NULL before it)
    instance_df INTEGER,
    instance_sigma DOUBLE,
    instance_pairs DOUBLE[]
);

-- one row per retryable infrastructure failure of a candidate (what makes a decision not measured)
CREATE TABLE proj_failures (
    run_id VARCHAR NOT NULL,
    candidate_id VARCHAR NOT NULL,
    seq BIGINT NOT NULL,
    cand_key BIGINT NOT NULL
);

-- one row per benchmark sample
CREATE TABLE proj_samples (
    run_id VARCHAR NOT NULL,
    candidate_id VARCHAR NOT NULL,
    case_id VARCHAR NOT NULL,
    phase VARCHAR NOT NULL,
    block INTEGER NOT NULL,
    sample_index INTEGER NOT NULL,
    sample_us DOUBLE NOT NULL,
    event_seq BIGINT NOT NULL,
    window_id VARCHAR,  -- store schema v6: the measurement window (NULL: measured alone, v1)
    instance INTEGER  -- store schema v9: which build of the source in its window (1: the first)
);

-- content-addressed: one row per raw source hash
CREATE TABLE proj_sources (
    source_hash VARCHAR NOT NULL,
    normalized_hash VARCHAR NOT NULL,
    text VARCHAR NOT NULL,
    size_bytes BIGINT NOT NULL,
    source_key BIGINT NOT NULL
);

CREATE TABLE proj_exclusions (
    run_id VARCHAR NOT NULL,
    candidate_id VARCHAR NOT NULL,
    seq BIGINT NOT NULL,
    signature VARCHAR NOT NULL,
    outcome VARCHAR NOT NULL,
    reason VARCHAR,
    hypothesis VARCHAR,
    bundle_digest VARCHAR,
    device_kind VARCHAR,
    bundle_key BIGINT
);

-- store schema v4: what the views read of the rarer events, so that no view parses the payloads of
-- `events` (docs/STORE.md "Performance of the report queries")

-- one row per RunFinished
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

-- one row per FinalistRevalidated
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

-- store schema v6: one row per note of a DecisionMade (stage 'decision') or FinalistRevalidated
-- ('revalidation'): what qualified it without blocking it (a case noisier than max_cv)
CREATE TABLE proj_notes (
    run_id VARCHAR NOT NULL,
    candidate_id VARCHAR,
    stage VARCHAR NOT NULL,
    event_seq BIGINT NOT NULL,
    note_index INTEGER NOT NULL,
    note VARCHAR NOT NULL
);

-- one row per case of every DecisionMade (stage 'decision') and FinalistRevalidated ('revalidation')
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

-- one row per ModelExchanged: what it cost
CREATE TABLE proj_exchanges (
    run_id VARCHAR NOT NULL,
    seq BIGINT NOT NULL,
    tokens_in BIGINT,
    tokens_out BIGINT,
    cost_usd DOUBLE
);

-- one row per baseline proposed (candidate_id 'baseline'): the entry point its source names (the
-- first @triton.jit function it launches, else its first: macros.sql tlx_kernel_name; '' when
-- none, NULL when its source is not stored), for run_identity
CREATE TABLE proj_baselines (
    run_id VARCHAR NOT NULL,
    seq BIGINT NOT NULL,
    source_hash VARCHAR,
    entry_point VARCHAR
);

-- store schema v5: one row per run that proposed a candidate: how many it proposed, the baseline
-- aside (its proj_candidates rows but the baseline's; v12: the baseline was counted before);
-- `promoted`, each of its proposed candidates, the baseline aside, whose
-- last decision promoted it with a speedup, with that speedup, in candidate_id order (NULL when
-- none); and the best of them (the highest speedup, the first candidate_id on a tie), which
-- kernel_history reads. Kept by each projection pass for the runs it touches, so no view reads
-- every decision of a run (docs/STORE.md "Performance of the report queries").
CREATE TABLE proj_run_candidates (
    run_id VARCHAR NOT NULL,
    candidates BIGINT NOT NULL,
    promoted STRUCT(candidate_id VARCHAR, speedup DOUBLE)[],
    best_candidate_id VARCHAR,
    best_speedup DOUBLE
);

-- store schema v7: one row per MachineSampled, the GPU's state during one harness benchmark call
-- (the BenchmarkSampled of the same run, candidate, case, phase, window and block); reasons: JSON
-- object of clocks event reason -> readings it was set in; neighbours: JSON list of the other
-- processes on the device
CREATE TABLE proj_machine (
    run_id VARCHAR NOT NULL,
    candidate_id VARCHAR NOT NULL,
    case_id VARCHAR NOT NULL,
    phase VARCHAR NOT NULL,
    window_id VARCHAR,
    block INTEGER NOT NULL,
    event_seq BIGINT NOT NULL,
    readings INTEGER,
    duration_ms DOUBLE,
    sm_clock_min_mhz DOUBLE,
    sm_clock_median_mhz DOUBLE,
    sm_clock_max_mhz DOUBLE,
    mem_clock_min_mhz DOUBLE,
    mem_clock_median_mhz DOUBLE,
    power_median_w DOUBLE,
    power_max_w DOUBLE,
    temperature_max_c DOUBLE,
    reasons JSON,
    neighbours JSON,
    source VARCHAR,
    instance INTEGER  -- store schema v9: which build of the source in its window (1: the first)
);
