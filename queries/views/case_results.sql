-- Per run, candidate, case and phase: sample count, median, p95 (linear interpolation) and
-- CV (sample standard deviation over the mean; 0 for one sample): stats.summarize() of
-- optimizer/decision/stats.py in SQL (tests/queries/test_views.py holds them equal).
SELECT
    run_id,
    candidate_id,
    case_id,
    phase,
    count(*) AS samples,
    median(sample_us) AS median_us,
    quantile_cont(sample_us, 0.95) AS p95_us,
    coalesce(stddev_samp(sample_us) / avg(sample_us), 0.0) AS cv,
    min(sample_us) AS min_us,
    avg(sample_us) AS mean_us
FROM proj_samples
GROUP BY run_id, candidate_id, case_id, phase
