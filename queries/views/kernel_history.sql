-- The best ever per kernel x bundle x device: how many runs tried it and when, and its best
-- source by pooled estimate (source_estimates: every measurement of a source, decisions and
-- final revalidations of every run, pooled into one speedup with one 99% CI; never the luckiest
-- of them) among the sources some run promoted, with how many measurements that figure pools
-- and where the source was first measured. On a tie, the source measured first. Speedups are
-- against each run's baseline.
WITH k AS (
    SELECT
        kernel_id,
        entry_point,
        kernel_file,
        bundle_digest,
        device_kind,
        count(*) AS runs,
        count(*) FILTER (WHERE status = 'finished') AS finished_runs,
        count(*) FILTER (WHERE success) AS successful_runs,
        sum(candidates) AS candidates,
        min(started_at) AS first_run_at,
        max(started_at) AS last_run_at,
        sum(cost_usd) AS cost_usd
    FROM runs
    GROUP BY kernel_id, entry_point, kernel_file, bundle_digest, device_kind
)
SELECT
    k.kernel_id,
    k.entry_point,
    k.kernel_file,
    k.bundle_digest,
    k.device_kind,
    k.runs,
    k.finished_runs,
    k.successful_runs,
    k.candidates,
    k.first_run_at,
    k.last_run_at,
    b.source_hash AS best_source_hash,
    b.pooled_speedup AS best_pooled_speedup,
    b.ci_low AS best_ci_low,
    b.ci_high AS best_ci_high,
    b.measurements AS best_measurements,
    b.runs AS best_runs,
    b.first_run_id AS best_first_run_id,
    b.first_candidate_id AS best_first_candidate_id,
    b.baseline_source_hash AS best_baseline_source_hash,
    k.cost_usd
FROM k
-- the estimates of this kernel's sources only (a lateral join: a filter on the view reaches the
-- runs whose measurements are read)
LEFT JOIN LATERAL (
    SELECT * FROM source_estimates e
    WHERE e.kernel_id IS NOT DISTINCT FROM k.kernel_id
      AND e.bundle_digest IS NOT DISTINCT FROM k.bundle_digest
      AND e.device_kind IS NOT DISTINCT FROM k.device_kind
      AND e.promotions > 0
    ORDER BY e.pooled_speedup DESC, e.first_run_id, e.source_hash
    LIMIT 1
) b ON true
