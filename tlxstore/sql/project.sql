-- The projections of the events in `unprojected` (project_tail.sql), one INSERT per table (and for
-- proj_run_candidates, whose rows are per run, UPDATEs and an INSERT), run in one transaction
-- with the advance of projection_state.projected_pos. Each payload is parsed once
-- (from_json into a struct), never once per field. A projection joins what earlier passes stored
-- (a decision its candidate, an exclusion its run), so passes run in pos order. Each statement
-- reads one event type from `unprojected`; one that reads none continues the statement before it
-- (it reads the temporary table that one made) and runs when that one runs.
INSERT INTO proj_runs
SELECT
    run_id, recorded_at, p.host, p.device.kind, p.device.backend, p.provider, p.model, p.kernel_path,
    p.kernel_sha256, p.bundle_digest, p.measurement_key, p.output_dir, p.label, p.tool_versions.triton,
    p.tool_versions.torch, p.device.architecture, p.device.num_sms, p.tool_versions.tlxdb, p.tool_versions.cuda,
    p.resumed_from,
    regexp_extract(p.kernel_path, '([^/\\]+[/\\][^/\\]+|[^/\\]+)$', 1),  -- kernel_file
    regexp_extract(p.kernel_path, '([^/\\]+)\.py$', 1)  -- kernel_stem
FROM (
    SELECT run_id, recorded_at, from_json(payload, '{"host": "VARCHAR", "device": {"kind": "VARCHAR", "backend": "VARCHAR",
        "architecture": "VARCHAR", "num_sms": "INTEGER"}, "provider": "VARCHAR", "model": "VARCHAR", "kernel_path": "VARCHAR",
        "kernel_sha256": "VARCHAR", "bundle_digest": "VARCHAR", "measurement_key": "VARCHAR", "output_dir": "VARCHAR",
        "label": "VARCHAR", "tool_versions": {"triton": "VARCHAR", "torch": "VARCHAR", "tlxdb": "VARCHAR", "cuda": "VARCHAR"},
        "resumed_from": "VARCHAR"}') AS p
    FROM unprojected WHERE type = 'RunStarted'
);

INSERT INTO proj_run_inputs
SELECT run_id, nullif(p.case_parameters::VARCHAR, '{}')::JSON, p.prior_runs
FROM (
    SELECT run_id, from_json(payload, '{"case_parameters": "JSON", "prior_runs": "VARCHAR[]"}') AS p
    FROM unprojected WHERE type = 'RunStarted'
);

INSERT INTO proj_candidates
SELECT
    c.run_id, c.p.candidate_id, c.seq, c.recorded_at, c.p.round, c.p.parent_id, c.p.provider, c.p.hypothesis,
    c.p.hypothesis_kind, c.p.source_hash, c.p.normalized_hash, r.measurement_key, c.p.knobs,
    tlx_key(c.run_id || '/' || c.p.candidate_id), tlx_key(r.measurement_key), tlx_key(c.p.source_hash),
    tlx_key(c.p.normalized_hash), c.p.change, c.p.evidence, c.p.expected_effect, c.p.risk, c.p.tokens_in,
    c.p.tokens_out, c.p.cost_usd, coalesce(c.p.remeasures, c.p.replays)  -- v1 named it replays
FROM (
    SELECT run_id, seq, recorded_at, from_json(payload, '{"candidate_id": "VARCHAR", "round": "INTEGER",
        "parent_id": "VARCHAR", "provider": "VARCHAR", "hypothesis": "VARCHAR", "hypothesis_kind": "VARCHAR",
        "source_hash": "VARCHAR", "normalized_hash": "VARCHAR", "knobs": "JSON", "change": "VARCHAR",
        "evidence": "VARCHAR", "expected_effect": "VARCHAR", "risk": "VARCHAR", "tokens_in": "BIGINT",
        "tokens_out": "BIGINT", "cost_usd": "DOUBLE", "remeasures": "VARCHAR",
        "replays": "VARCHAR"}') AS p
    FROM unprojected WHERE type = 'CandidateProposed'
) c
LEFT JOIN proj_runs r ON r.run_id = c.run_id;

-- each run's candidate count, the baseline aside (schema v12; a run of 12 candidates read 13): this
-- pass's proposals added to it, then a row for each run that had none (its first proposals). Not
-- one MERGE: DuckLake writes a MERGE's new rows to a Parquet file of their own, where an INSERT's
-- few rows stay inlined in its catalog.
UPDATE proj_run_candidates SET candidates = candidates + s.n
FROM (
    SELECT run_id, count(*) FILTER (WHERE payload->>'candidate_id' IS DISTINCT FROM 'baseline') AS n
    FROM unprojected WHERE type = 'CandidateProposed' GROUP BY run_id
) s
WHERE s.run_id = proj_run_candidates.run_id;

INSERT INTO proj_run_candidates (run_id, candidates)
SELECT run_id, count(*) FILTER (WHERE payload->>'candidate_id' IS DISTINCT FROM 'baseline')
FROM unprojected WHERE type = 'CandidateProposed'
    AND run_id NOT IN (SELECT run_id FROM proj_run_candidates)
GROUP BY run_id;

-- before the decisions: a decision in the same pass sees the failures that came before it
INSERT INTO proj_failures
SELECT run_id, p.candidate_id, seq, tlx_key(run_id || '/' || p.candidate_id)
FROM (
    SELECT run_id, seq, from_json(payload, '{"candidate_id": "VARCHAR", "retryable": "BOOLEAN"}') AS p
    FROM unprojected WHERE type = 'InfrastructureFailed'
)
WHERE p.retryable AND p.candidate_id IS NOT NULL;

-- this pass's decisions as proj_decisions holds them, for it and for each run's promoted candidates
CREATE OR REPLACE TEMPORARY TABLE decided AS
SELECT
    d.run_id, d.p.candidate_id, d.seq, d.recorded_at, d.p.outcome, d.p.reason, d.p.speedup, d.p.ci_low, d.p.ci_high,
    d.p.compared_to, d.k, c.round, c.proposed_at, c.hypothesis, c.knobs, c.source_hash, c.normalized_hash,
    c.measurement_key, c.source_key, c.norm_key, c.mk_key,
    -- measured as the loop recorded it (DecisionMade v2); a v1 decision records none, and is
    -- taken as v1 stores had it: no retryable failure of its candidate before it
    coalesce(d.p.measured, NOT EXISTS (
        SELECT 1 FROM proj_failures f
        WHERE f.cand_key = d.k AND f.run_id = d.run_id AND f.candidate_id = d.p.candidate_id AND f.seq < d.seq
    )),
    -- what the interval carried of instances (DecisionMade v3; NULL in an older decision)
    d.p.instance_df, d.p.instance_sigma, d.p.instance_pairs
FROM (
    SELECT run_id, seq, recorded_at, p, tlx_key(run_id || '/' || p.candidate_id) AS k
    FROM (
        SELECT run_id, seq, recorded_at, from_json(payload, '{"candidate_id": "VARCHAR", "outcome": "VARCHAR",
            "reason": "VARCHAR", "speedup": "DOUBLE", "ci_low": "DOUBLE", "ci_high": "DOUBLE",
            "compared_to": "VARCHAR", "measured": "BOOLEAN", "instance_df": "INTEGER",
            "instance_sigma": "DOUBLE", "instance_pairs": "DOUBLE[]"}') AS p
        FROM unprojected WHERE type = 'DecisionMade'
    )
) d
LEFT JOIN proj_candidates c ON c.cand_key = d.k AND c.run_id = d.run_id AND c.candidate_id = d.p.candidate_id;

INSERT INTO proj_decisions SELECT * FROM decided;

-- each run's promoted candidates and its best (proj_run_candidates, as schema.sql defines them),
-- from the decisions in `decided`. A run's events are stored in seq order, so its decisions in
-- `decided` come after every one stored before: a candidate they decide has its last decision
-- among them, and every other candidate keeps its own. So a run's list is the stored one without
-- the candidates decided here, plus those whose last decision here promotes them. (schema.upgrade
-- fills the lists with this statement, `decided` holding every stored decision.)
UPDATE proj_run_candidates
SET promoted = b.promoted, best_candidate_id = b.best.candidate_id, best_speedup = b.best.speedup
FROM (
    SELECT run_id, promoted, list_reduce(promoted, (a, c) -> CASE
        WHEN c.speedup > a.speedup OR (c.speedup = a.speedup AND c.candidate_id < a.candidate_id) THEN c ELSE a
    END) AS best
    FROM (
        SELECT t.run_id,
            nullif(list_sort(list_filter(coalesce(t.promoted, []), p -> NOT list_contains(n.decided, p.candidate_id))
                || coalesce(n.promoted, [])), []) AS promoted
        FROM proj_run_candidates t
        JOIN (
            SELECT run_id, list(candidate_id) AS decided, list({'candidate_id': candidate_id, 'speedup': d.speedup})
                FILTER (WHERE d.outcome = 'promoted' AND candidate_id <> 'baseline' AND d.speedup IS NOT NULL) AS promoted
            FROM (  -- each candidate's last decision here (a decision of a proposed candidate)
                SELECT run_id, candidate_id, arg_max({'outcome': outcome, 'speedup': speedup}, seq) AS d
                FROM decided
                WHERE source_key IS NOT NULL
                GROUP BY run_id, candidate_id
            )
            GROUP BY run_id
        ) n ON n.run_id = t.run_id
    )
) b
WHERE b.run_id = proj_run_candidates.run_id;

DROP TABLE decided;

-- one row per sample: the list and its positions unnested side by side
INSERT INTO proj_samples
SELECT run_id, p.candidate_id, p.case_id, p.phase, p.block, unnest(range(len(p.samples_us))), unnest(p.samples_us), seq,
    p.window_id, coalesce(p.instance, 1)
FROM (
    SELECT run_id, seq, from_json(payload, '{"candidate_id": "VARCHAR", "case_id": "VARCHAR", "phase": "VARCHAR",
        "block": "INTEGER", "samples_us": "DOUBLE[]", "window_id": "VARCHAR", "instance": "INTEGER"}') AS p
    FROM unprojected WHERE type = 'BenchmarkSampled'
);

-- the machine's state per benchmark call; reasons and neighbours kept as the JSON they were
INSERT INTO proj_machine
SELECT run_id, p.candidate_id, p.case_id, p.phase, p.window_id, p.block, seq, p.readings, p.duration_ms,
    p.sm_clock_min_mhz, p.sm_clock_median_mhz, p.sm_clock_max_mhz, p.mem_clock_min_mhz, p.mem_clock_median_mhz,
    p.power_median_w, p.power_max_w, p.temperature_max_c, CAST(payload -> 'reasons' AS JSON),
    CAST(payload -> 'neighbours' AS JSON), p.source, coalesce(p.instance, 1)
FROM (
    SELECT run_id, seq, payload, from_json(payload, '{"candidate_id": "VARCHAR", "case_id": "VARCHAR", "phase": "VARCHAR",
        "window_id": "VARCHAR", "block": "INTEGER", "readings": "INTEGER", "duration_ms": "DOUBLE",
        "sm_clock_min_mhz": "DOUBLE", "sm_clock_median_mhz": "DOUBLE", "sm_clock_max_mhz": "DOUBLE",
        "mem_clock_min_mhz": "DOUBLE", "mem_clock_median_mhz": "DOUBLE", "power_median_w": "DOUBLE",
        "power_max_w": "DOUBLE", "temperature_max_c": "DOUBLE", "source": "VARCHAR", "instance": "INTEGER"}') AS p
    FROM unprojected WHERE type = 'MachineSampled'
);

INSERT INTO proj_sources
WITH n AS (
    SELECT p, tlx_key(p.source_hash) AS k
    FROM (
        SELECT from_json(payload, '{"source_hash": "VARCHAR", "normalized_hash": "VARCHAR", "text": "VARCHAR",
            "size_bytes": "BIGINT"}') AS p
        FROM unprojected WHERE type = 'SourceStored'
    )
),
-- stored sources that may be the same: their keys matched first, the hashes read only for those
known AS MATERIALIZED (SELECT source_key, source_hash FROM proj_sources WHERE source_key IN (SELECT k FROM n))
SELECT DISTINCT ON (n.p.source_hash) n.p.source_hash, n.p.normalized_hash, n.p.text, n.p.size_bytes, n.k
FROM n
WHERE NOT EXISTS (SELECT 1 FROM known s WHERE s.source_key = n.k AND s.source_hash = n.p.source_hash);

-- after the sources: a baseline's source is stored before it is proposed
INSERT INTO proj_baselines
SELECT c.run_id, c.seq, c.p.source_hash, tlx_kernel_name(s.text)
FROM (
    SELECT run_id, seq, from_json(payload, '{"candidate_id": "VARCHAR", "source_hash": "VARCHAR"}') AS p
    FROM unprojected WHERE type = 'CandidateProposed'
) c
LEFT JOIN proj_sources s ON s.source_key = tlx_key(c.p.source_hash) AND s.source_hash = c.p.source_hash
WHERE c.p.candidate_id = 'baseline';

INSERT INTO proj_exclusions
SELECT
    x.run_id, x.p.candidate_id, x.seq, x.p.signature, x.p.outcome, x.p.reason, x.p.hypothesis,
    r.bundle_digest, r.device_kind, tlx_key(r.bundle_digest)
FROM (
    SELECT run_id, seq, from_json(payload, '{"candidate_id": "VARCHAR", "signature": "VARCHAR",
        "outcome": "VARCHAR", "reason": "VARCHAR", "hypothesis": "VARCHAR"}') AS p
    FROM unprojected WHERE type = 'ExclusionRecorded'
) x
LEFT JOIN proj_runs r ON r.run_id = x.run_id;

INSERT INTO proj_finishes
SELECT run_id, seq, recorded_at, p.stopping_reason, p.success, p.winner_id, p.speedup, p.detail
FROM (
    SELECT run_id, seq, recorded_at, from_json(payload, '{"stopping_reason": "VARCHAR", "success": "BOOLEAN",
        "winner_id": "VARCHAR", "speedup": "DOUBLE", "detail": "VARCHAR"}') AS p
    FROM unprojected WHERE type = 'RunFinished'
);

INSERT INTO proj_revalidations
SELECT run_id, p.candidate_id, seq, recorded_at, p.survived, p.reason, p.speedup, p.ci_low, p.ci_high, p.alternations
FROM (
    SELECT run_id, seq, recorded_at, from_json(payload, '{"candidate_id": "VARCHAR", "survived": "BOOLEAN",
        "reason": "VARCHAR", "speedup": "DOUBLE", "ci_low": "DOUBLE", "ci_high": "DOUBLE", "alternations": "INTEGER"}') AS p
    FROM unprojected WHERE type = 'FinalistRevalidated'
);

-- the cases of decisions and of revalidations: two statements, each of one event type; only the
-- `cases` array is parsed into structs (from_json of the whole payload with it costs 3x)
INSERT INTO proj_case_speedups
SELECT d.run_id, d.candidate_id, 'decision', c.case_id, c.weight, c.baseline_median_us, c.candidate_median_us, c.speedup,
    c.baseline_p95_us, c.candidate_p95_us, c.baseline_cv, c.candidate_cv, d.seq
FROM (
    SELECT run_id, seq, payload ->> 'candidate_id' AS candidate_id, from_json(payload -> 'cases', '[{"case_id": "VARCHAR", "weight": "DOUBLE",
        "baseline_median_us": "DOUBLE", "candidate_median_us": "DOUBLE", "speedup": "DOUBLE", "candidate_cv": "DOUBLE",
        "baseline_p95_us": "DOUBLE", "candidate_p95_us": "DOUBLE", "baseline_cv": "DOUBLE"}]') AS cases
    FROM unprojected WHERE type = 'DecisionMade'
) d, unnest(d.cases) AS t(c);

INSERT INTO proj_case_speedups
SELECT d.run_id, d.candidate_id, 'revalidation', c.case_id, c.weight, c.baseline_median_us, c.candidate_median_us, c.speedup,
    c.baseline_p95_us, c.candidate_p95_us, c.baseline_cv, c.candidate_cv, d.seq
FROM (
    SELECT run_id, seq, payload ->> 'candidate_id' AS candidate_id, from_json(payload -> 'cases', '[{"case_id": "VARCHAR", "weight": "DOUBLE",
        "baseline_median_us": "DOUBLE", "candidate_median_us": "DOUBLE", "speedup": "DOUBLE", "candidate_cv": "DOUBLE",
        "baseline_p95_us": "DOUBLE", "candidate_p95_us": "DOUBLE", "baseline_cv": "DOUBLE"}]') AS cases
    FROM unprojected WHERE type = 'FinalistRevalidated'
) d, unnest(d.cases) AS t(c);

-- the notes of decisions and of revalidations, one row each (most events have none)
INSERT INTO proj_notes
SELECT run_id, p.candidate_id, 'decision', seq, unnest(range(len(p.notes))), unnest(p.notes)
FROM (
    SELECT run_id, seq, from_json(payload, '{"candidate_id": "VARCHAR", "notes": "VARCHAR[]"}') AS p
    FROM unprojected WHERE type = 'DecisionMade'
)
WHERE len(p.notes) > 0;

INSERT INTO proj_notes
SELECT run_id, p.candidate_id, 'revalidation', seq, unnest(range(len(p.notes))), unnest(p.notes)
FROM (
    SELECT run_id, seq, from_json(payload, '{"candidate_id": "VARCHAR", "notes": "VARCHAR[]"}') AS p
    FROM unprojected WHERE type = 'FinalistRevalidated'
)
WHERE len(p.notes) > 0;

INSERT INTO proj_exchanges
SELECT run_id, seq, p.tokens_in, p.tokens_out, p.cost_usd
FROM (
    SELECT run_id, seq, from_json(payload, '{"tokens_in": "BIGINT", "tokens_out": "BIGINT", "cost_usd": "DOUBLE"}') AS p
    FROM unprojected WHERE type = 'ModelExchanged'
);
