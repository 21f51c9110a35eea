-- Baseline and best per case over time, per kernel, bundle and device: one row per run and case.
-- baseline_median_us is the run's validation of the untouched kernel; best_median_us is the
-- winner's median in the final revalidation (its round median when it was not revalidated), or
-- the baseline's when the run found no winner. speedup = baseline_median_us / best_median_us:
-- that run's measurement of its result, one point of the series. best_source_hash is that
-- result's source, and pooled_* its one estimate over every measurement of it in any run
-- (source_estimates; NULL for the baseline, the unit of every speedup), so a source that several
-- runs re-measured shows one figure, not each run's.
-- (Read from the projections, not from the runs view, so a filter on the kernel, bundle or device
-- reaches the runs before their samples are read; the rows and the estimates are one union whose
-- window is partitioned by those keys, so such a filter reaches the estimates too.)
WITH finished AS (
    SELECT run_id, success, winner_id FROM proj_finishes
    QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY seq DESC) = 1
),
r AS (
    SELECT h.run_id, i.kernel_id, i.bundle_digest, i.device_kind, i.measurement_key,
        i.baseline_source_hash, p.started_at, f.success, f.winner_id
    FROM run_heads h
    LEFT JOIN run_identity i ON i.run_id = h.run_id
    LEFT JOIN proj_runs p ON p.run_id = h.run_id
    LEFT JOIN finished f ON f.run_id = h.run_id
),
base AS (
    SELECT run_id, case_id, median(sample_us) AS median_us, count(*) AS samples FROM proj_samples
    WHERE candidate_id = 'baseline' AND phase = 'validation'
    GROUP BY run_id, case_id
),
reval AS (
    SELECT run_id, candidate_id, case_id, candidate_median_us, baseline_median_us
    FROM proj_case_speedups WHERE stage = 'revalidation'
    QUALIFY row_number() OVER (PARTITION BY run_id, candidate_id, case_id ORDER BY event_seq DESC) = 1
),
-- the round medians of the winners only, not of every candidate of every run
rounds AS (
    SELECT s.run_id, s.candidate_id, s.case_id, median(s.sample_us) AS median_us
    FROM finished f
    JOIN proj_samples s ON s.run_id = f.run_id AND s.candidate_id = f.winner_id
    WHERE s.phase = 'round'
    GROUP BY s.run_id, s.candidate_id, s.case_id
),
rows AS (
    SELECT
        r.kernel_id,
        r.bundle_digest,
        r.device_kind,
        r.measurement_key,
        r.baseline_source_hash,
        r.run_id,
        r.started_at,
        b.case_id,
        b.median_us AS baseline_median_us,
        b.samples AS baseline_samples,
        coalesce(CASE WHEN r.success THEN r.winner_id END, 'baseline') AS best_candidate_id,
        CASE WHEN r.success THEN coalesce(v.candidate_median_us, w.median_us) ELSE b.median_us END AS best_median_us,
        b.median_us / (CASE WHEN r.success THEN coalesce(v.candidate_median_us, w.median_us) ELSE b.median_us END) AS speedup,
        v.baseline_median_us AS revalidation_baseline_median_us,
        coalesce(ws.source_hash, r.baseline_source_hash) AS best_source_hash
    FROM r
    JOIN base b ON b.run_id = r.run_id
    LEFT JOIN reval v ON v.run_id = r.run_id AND v.candidate_id = r.winner_id AND v.case_id = b.case_id
    LEFT JOIN rounds w ON w.run_id = r.run_id AND w.candidate_id = r.winner_id AND w.case_id = b.case_id
    LEFT JOIN LATERAL (
        SELECT source_hash FROM proj_candidates
        WHERE r.success AND run_id = r.run_id AND candidate_id = r.winner_id
    ) ws ON true
),
both_kinds AS (
    SELECT * FROM rows
    UNION ALL BY NAME
    SELECT
        kernel_id, bundle_digest, device_kind, measurement_key, baseline_source_hash,
        source_hash AS best_source_hash, pooled_speedup, ci_low AS pooled_ci_low,
        ci_high AS pooled_ci_high, measurements AS pooled_measurements
    FROM source_estimates
)
SELECT
    kernel_id,
    bundle_digest,
    device_kind,
    run_id,
    started_at,
    case_id,
    baseline_median_us,
    baseline_samples,
    best_candidate_id,
    best_median_us,
    speedup,
    revalidation_baseline_median_us,
    best_source_hash,
    max(pooled_speedup) OVER source AS pooled_speedup,
    max(pooled_ci_low) OVER source AS pooled_ci_low,
    max(pooled_ci_high) OVER source AS pooled_ci_high,
    max(pooled_measurements) OVER source AS pooled_measurements
FROM both_kinds
WINDOW source AS (
    PARTITION BY kernel_id, bundle_digest, device_kind, measurement_key, baseline_source_hash,
        best_source_hash
)
QUALIFY run_id IS NOT NULL
