-- For each run (run_id: the run asking), the configurations other runs promoted for the same
-- kernel (kernel_id) on a device of the same architecture family, nearest first: what a new run
-- can start from when its measurement identity is new (new cases, another GPU of the family,
-- another Triton or torch, an edited kernel). Configurations of the runs the asking run named
-- with --prior-run come in whatever their kernel and device. One row per source, at its nearest
-- run (nearest_runs: which runs, and the distance of each); the speedup is its one pooled figure
-- (source_estimates) against that run's baseline. Ties: the best pooled speedup first, then the
-- earliest run.
--
-- Three parameters, each NULL as a view (every run, every run drawn from, every estimate), which
-- the lookup (queries/lookups.py nearest_configs) binds to read the first rows of one run alone:
-- run_id, the run asking; from_runs, the runs drawn from; measurement_keys, the estimates pooled
-- (those of the runs drawn from: a filter on the key reaches the runs whose measurements
-- source_estimates pools, where a join would pool every source of the store first).
WITH near AS (
    SELECT * FROM nearest_runs
    WHERE ($run_id::VARCHAR IS NULL OR run_id = $run_id::VARCHAR)
        AND ($from_runs::VARCHAR[] IS NULL OR list_contains($from_runs::VARCHAR[], from_run_id))
),
promoted AS (
    -- the decisions of the runs drawn from alone, before the window over them
    SELECT d.run_id, d.candidate_id, d.source_hash, d.knobs, d.speedup
    FROM proj_decisions d
    SEMI JOIN near f ON f.from_run_id = d.run_id
    WHERE d.outcome = 'promoted' AND d.round > 0 AND d.speedup IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY d.run_id, d.source_hash ORDER BY d.speedup DESC, d.candidate_id) = 1
),
estimates AS (
    SELECT * FROM source_estimates
    WHERE $measurement_keys::VARCHAR[] IS NULL OR list_contains($measurement_keys::VARCHAR[], measurement_key)
),
ranked AS (
    SELECT
        p.run_id,
        p.from_run_id,
        c.candidate_id AS from_candidate_id,
        c.source_hash,
        c.knobs,
        coalesce(e.pooled_speedup, c.speedup) AS speedup,
        e.ci_low,
        e.ci_high,
        coalesce(e.measurements, 1) AS measurements,
        p.from_prior_run,
        p.same_bundle,
        p.same_device,
        p.same_versions,
        p.same_source,
        p.shape_distance,
        p.distance,
        p.differs,
        p.from_started_at
    FROM near p
    JOIN promoted c ON c.run_id = p.from_run_id
    LEFT JOIN estimates e ON e.kernel_id = p.from_kernel_id
        AND e.measurement_key = p.from_measurement_key
        AND e.baseline_source_hash = p.from_baseline_source_hash
        AND e.source_hash = c.source_hash
    QUALIFY row_number() OVER (
        PARTITION BY p.run_id, c.source_hash
        ORDER BY p.distance, speedup DESC, p.from_started_at, p.from_run_id
    ) = 1
)
SELECT
    run_id,
    row_number() OVER (
        PARTITION BY run_id ORDER BY distance, speedup DESC, from_started_at, from_run_id, from_candidate_id
    ) AS rank,
    from_run_id,
    from_candidate_id,
    source_hash,
    knobs,
    speedup,
    ci_low,
    ci_high,
    measurements,
    distance,
    shape_distance,
    same_bundle,
    same_device,
    same_versions,
    same_source,
    from_prior_run,
    differs
FROM ranked
