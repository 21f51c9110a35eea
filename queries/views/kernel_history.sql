-- The best ever per kernel x bundle x device: how many runs tried it and when, and its best
-- source by pooled estimate (source_estimates: every measurement of a source, decisions and
-- final revalidations of every run, pooled into one speedup with one 99% CI; never the luckiest
-- of them) among the sources some run promoted, with how many measurements that figure pools
-- and where the source was first measured. On a tie, the source measured first. Speedups are
-- against each run's baseline.
-- (The runs and the estimates are one union grouped by the kernel's keys, so that a filter on
-- those keys reaches both, and no estimate of another kernel is computed.)
WITH both_kinds AS (
    SELECT
        kernel_id, entry_point, kernel_file, bundle_digest, device_kind,
        run_id, status, success, candidates, started_at, cost_usd
    FROM runs
    UNION ALL BY NAME
    SELECT
        kernel_id, entry_point, kernel_file, bundle_digest, device_kind,
        {
            'source_hash': source_hash,
            'pooled_speedup': pooled_speedup,
            'ci_low': ci_low,
            'ci_high': ci_high,
            'measurements': measurements,
            'runs': runs,
            'first_run_id': first_run_id,
            'first_candidate_id': first_candidate_id,
            'baseline_source_hash': baseline_source_hash
        } AS estimate
    FROM source_estimates
    WHERE promotions > 0
),
k AS (
    SELECT
        kernel_id,
        entry_point,
        kernel_file,
        bundle_digest,
        device_kind,
        count(run_id) AS runs,
        count(run_id) FILTER (WHERE status = 'finished') AS finished_runs,
        count(run_id) FILTER (WHERE success) AS successful_runs,
        sum(candidates) AS candidates,
        min(started_at) AS first_run_at,
        max(started_at) AS last_run_at,
        first(estimate ORDER BY estimate.pooled_speedup DESC, estimate.first_run_id, estimate.source_hash)
            FILTER (WHERE estimate IS NOT NULL) AS best,
        sum(cost_usd) AS cost_usd
    FROM both_kinds
    GROUP BY kernel_id, entry_point, kernel_file, bundle_digest, device_kind
)
SELECT
    kernel_id,
    entry_point,
    kernel_file,
    bundle_digest,
    device_kind,
    runs,
    finished_runs,
    successful_runs,
    candidates,
    first_run_at,
    last_run_at,
    best.source_hash AS best_source_hash,
    best.pooled_speedup AS best_pooled_speedup,
    best.ci_low AS best_ci_low,
    best.ci_high AS best_ci_high,
    best.measurements AS best_measurements,
    best.runs AS best_runs,
    best.first_run_id AS best_first_run_id,
    best.first_candidate_id AS best_first_candidate_id,
    best.baseline_source_hash AS best_baseline_source_hash,
    cost_usd
FROM k
