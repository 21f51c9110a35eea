-- Baseline and best per case over time, per kernel, bundle and device: one row per run and case.
-- baseline_median_us is the run's validation of the untouched kernel; best_median_us is the
-- winner's median in the final revalidation (its round median when it was not revalidated), or
-- the baseline's when the run found no winner. speedup = baseline_median_us / best_median_us.
WITH base AS (
    SELECT run_id, case_id, median_us, samples FROM case_results
    WHERE candidate_id = 'baseline' AND phase = 'validation'
),
reval AS (
    SELECT run_id, candidate_id, case_id, candidate_median_us, baseline_median_us
    FROM case_speedups WHERE stage = 'revalidation'
    QUALIFY row_number() OVER (PARTITION BY run_id, candidate_id, case_id ORDER BY event_seq DESC) = 1
),
rounds AS (SELECT run_id, candidate_id, case_id, median_us FROM case_results WHERE phase = 'round')
SELECT
    r.kernel_id,
    r.bundle_digest,
    r.device_kind,
    r.run_id,
    r.started_at,
    b.case_id,
    b.median_us AS baseline_median_us,
    b.samples AS baseline_samples,
    coalesce(CASE WHEN r.success THEN r.winner_id END, 'baseline') AS best_candidate_id,
    CASE WHEN r.success THEN coalesce(v.candidate_median_us, w.median_us) ELSE b.median_us END AS best_median_us,
    b.median_us / (CASE WHEN r.success THEN coalesce(v.candidate_median_us, w.median_us) ELSE b.median_us END) AS speedup,
    v.baseline_median_us AS revalidation_baseline_median_us
FROM runs r
JOIN base b ON b.run_id = r.run_id
LEFT JOIN reval v ON v.run_id = r.run_id AND v.candidate_id = r.winner_id AND v.case_id = b.case_id
LEFT JOIN rounds w ON w.run_id = r.run_id AND w.candidate_id = r.winner_id AND w.case_id = b.case_id
