-- Per-case figures behind each speedup: one row per case of every decision (stage 'decision')
-- and of every final revalidation (stage 'revalidation'): weight, baseline and candidate medians
-- (us), p95s, CVs and the case's speedup (baseline median / candidate median).
SELECT
    run_id,
    candidate_id,
    stage,
    case_id,
    weight,
    baseline_median_us,
    candidate_median_us,
    speedup,
    baseline_p95_us,
    candidate_p95_us,
    baseline_cv,
    candidate_cv,
    event_seq
FROM proj_case_speedups
