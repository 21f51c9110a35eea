-- For each run (run_id: the run asking), the configurations other runs promoted for the same
-- kernel (kernel_id) on a device of the same architecture family, nearest first: what a new run
-- can start from when its measurement identity is new (new cases, another GPU of the family,
-- another Triton or torch, an edited kernel). Configurations of the runs the asking run named
-- with --prior-run come in whatever their kernel and device. One row per source, at its nearest
-- run; the speedup is its one pooled figure (source_estimates) against that run's baseline.
--
-- distance = shape_distance (0 for the same bundle; else, per case of the asking run, the
-- parameter distance to the nearest case of the other run, averaged: per parameter |log2 a -
-- log2 b| for two positive numbers, 0 for equal values, 1 for differing or missing ones (a dtype);
-- 1 where either run recorded no parameters) + 1 for another device kind + 0.5 for another Triton
-- or torch + 1 for another baseline source (the kernel was edited: its knobs may no longer
-- render, which tune checks). Ties: the best pooled speedup first, then the earliest run.
WITH r AS (
    SELECT
        p.run_id, p.started_at, i.kernel_id, i.baseline_source_hash, p.bundle_digest, p.device_kind,
        p.triton_version, p.torch_version, p.measurement_key, n.case_parameters,
        coalesce(n.prior_runs, []) AS prior_runs,
        CASE
            WHEN regexp_matches(lower(p.architecture), '^sm_?\d+')
                THEN 'sm_' || (regexp_extract(lower(p.architecture), '^sm_?(\d+)', 1)::INTEGER // 10)::VARCHAR
            WHEN regexp_matches(lower(p.architecture), '^gfx\d') THEN left(lower(p.architecture), 4)
            ELSE lower(coalesce(p.architecture, ''))
        END AS family
    FROM proj_runs p
    JOIN run_identity i ON i.run_id = p.run_id
    LEFT JOIN proj_run_inputs n ON n.run_id = p.run_id
),
promoted AS (
    SELECT d.run_id, d.candidate_id, d.source_hash, d.knobs, d.speedup
    FROM proj_decisions d
    WHERE d.outcome = 'promoted' AND d.round > 0 AND d.speedup IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY d.run_id, d.source_hash ORDER BY d.speedup DESC, d.candidate_id) = 1
),
pairs AS (
    SELECT
        a.run_id,
        o.run_id AS from_run_id,
        o.started_at AS from_started_at,
        o.kernel_id AS from_kernel_id,
        o.measurement_key AS from_measurement_key,
        o.baseline_source_hash AS from_baseline_source_hash,
        list_contains(a.prior_runs, o.run_id) AS from_prior_run,
        a.bundle_digest = o.bundle_digest AS same_bundle,
        a.device_kind IS NOT DISTINCT FROM o.device_kind AS same_device,
        a.triton_version IS NOT DISTINCT FROM o.triton_version
            AND a.torch_version IS NOT DISTINCT FROM o.torch_version AS same_versions,
        a.baseline_source_hash IS NOT DISTINCT FROM o.baseline_source_hash AS same_source,
        CASE
            WHEN a.bundle_digest = o.bundle_digest THEN 0.0
            WHEN a.case_parameters IS NOT NULL AND o.case_parameters IS NOT NULL THEN (
                SELECT avg(nearest) FROM (
                    SELECT min(list_sum([
                        CASE
                            WHEN json_type(ac.value -> k) IN ('BIGINT', 'UBIGINT', 'DOUBLE')
                                AND json_type(oc.value -> k) IN ('BIGINT', 'UBIGINT', 'DOUBLE')
                                AND (ac.value ->> k)::DOUBLE > 0 AND (oc.value ->> k)::DOUBLE > 0
                                THEN abs(log2((ac.value ->> k)::DOUBLE) - log2((oc.value ->> k)::DOUBLE))
                            WHEN (ac.value ->> k) = (oc.value ->> k) THEN 0.0
                            ELSE 1.0
                        END
                        FOR k IN list_distinct(json_keys(ac.value) || json_keys(oc.value))
                    ])) AS nearest
                    FROM json_each(a.case_parameters) ac, json_each(o.case_parameters) oc
                    GROUP BY ac.key
                )
            )
        END AS shape_distance,
        concat_ws('; ',
            CASE
                WHEN a.bundle_digest = o.bundle_digest THEN 'same bundle'
                WHEN a.case_parameters IS NULL OR o.case_parameters IS NULL THEN 'bundle: another bundle'
                WHEN list_sort(json_keys(a.case_parameters)) = list_sort(json_keys(o.case_parameters))
                    THEN 'bundle: case parameters changed'
                ELSE 'bundle: cases ' || array_to_string(list_sort(json_keys(o.case_parameters)), ', ')
                    || ' → ' || array_to_string(list_sort(json_keys(a.case_parameters)), ', ')
            END,
            CASE WHEN a.device_kind IS NOT DISTINCT FROM o.device_kind THEN 'same device'
                ELSE 'device: ' || coalesce(o.device_kind, '?') || ' → ' || coalesce(a.device_kind, '?') END,
            CASE WHEN a.triton_version IS DISTINCT FROM o.triton_version
                THEN 'Triton ' || coalesce(o.triton_version, '?') || ' → ' || coalesce(a.triton_version, '?') END,
            CASE WHEN a.torch_version IS DISTINCT FROM o.torch_version
                THEN 'torch ' || coalesce(o.torch_version, '?') || ' → ' || coalesce(a.torch_version, '?') END,
            CASE WHEN a.baseline_source_hash IS DISTINCT FROM o.baseline_source_hash THEN 'kernel source edited' END,
            CASE WHEN list_contains(a.prior_runs, o.run_id) THEN 'named with --prior-run' END
        ) AS differs
    FROM r a
    JOIN r o ON o.run_id <> a.run_id
        AND ((o.kernel_id = a.kernel_id AND o.family = a.family) OR list_contains(a.prior_runs, o.run_id))
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
        coalesce(p.shape_distance, 1.0) + CASE WHEN p.same_device THEN 0 ELSE 1 END
            + CASE WHEN p.same_versions THEN 0 ELSE 0.5 END
            + CASE WHEN p.same_source THEN 0 ELSE 1 END AS distance,
        p.differs,
        p.from_started_at
    FROM pairs p
    JOIN promoted c ON c.run_id = p.from_run_id
    LEFT JOIN source_estimates e ON e.kernel_id = p.from_kernel_id
        AND e.measurement_key = p.from_measurement_key
        AND e.baseline_source_hash = p.from_baseline_source_hash
        AND e.source_hash = c.source_hash
    QUALIFY row_number() OVER (
        PARTITION BY p.run_id, c.source_hash
        ORDER BY distance, speedup DESC, p.from_started_at, p.from_run_id
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
