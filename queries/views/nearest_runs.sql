-- For each run (run_id: the run asking), the other runs it may start from and how near each is:
-- those of the same kernel (kernel_id) on a device of the same architecture family, and those
-- the asking run named with --prior-run whatever their kernel and device. nearest_history ranks
-- the configurations these runs promoted by `distance`.
--
-- distance = shape_distance (0 for the same bundle; else, per case of the asking run, the
-- parameter distance to the nearest case of the other run, averaged: per parameter |log2 a -
-- log2 b| for two positive numbers, 0 for equal values, 1 for differing or missing ones (a dtype);
-- NULL, counted 1, where either run recorded no parameters) + 1 for another device kind + 0.5
-- for another Triton or torch + 1 for another baseline source (the kernel was edited: its knobs
-- may no longer render, which tune checks). `differs` says it in words.
-- (A filter on run_id reaches the asking side of the pairs: one run is compared with the others,
-- not every run with every other.)
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
)
SELECT
    run_id,
    from_run_id,
    from_started_at,
    from_kernel_id,
    from_measurement_key,
    from_baseline_source_hash,
    from_prior_run,
    same_bundle,
    same_device,
    same_versions,
    same_source,
    shape_distance,
    coalesce(shape_distance, 1.0) + CASE WHEN same_device THEN 0 ELSE 1 END
        + CASE WHEN same_versions THEN 0 ELSE 0.5 END
        + CASE WHEN same_source THEN 0 ELSE 1 END AS distance,
    differs
FROM pairs
