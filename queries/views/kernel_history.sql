-- The best ever per kernel x bundle x device: how many runs tried it, when, and the best final
-- (revalidated) speedup of a run's winner with its run, candidate and source hash; beside it the
-- best decided speedup of any promoted candidate (before revalidation) and where it came from.
WITH promoted AS (
    SELECT run_id, candidate_id, decided_speedup, source_hash
    FROM candidates
    WHERE outcome = 'promoted' AND candidate_id <> 'baseline' AND decided_speedup IS NOT NULL
)
SELECT
    r.kernel_id,
    any_value(r.entry_point) AS entry_point,
    any_value(r.kernel_file) AS kernel_file,
    r.bundle_digest,
    r.device_kind,
    count(*) AS runs,
    count(*) FILTER (WHERE r.status = 'finished') AS finished_runs,
    count(*) FILTER (WHERE r.success) AS successful_runs,
    sum(r.candidates) AS candidates,
    min(r.started_at) AS first_run_at,
    max(r.started_at) AS last_run_at,
    max(r.revalidated_speedup) FILTER (WHERE r.success) AS best_revalidated_speedup,
    arg_max(r.run_id, r.revalidated_speedup) FILTER (WHERE r.success) AS best_run_id,
    arg_max(r.winner_id, r.revalidated_speedup) FILTER (WHERE r.success) AS best_candidate_id,
    arg_max(r.winner_source_hash, r.revalidated_speedup) FILTER (WHERE r.success) AS best_source_hash,
    max(p.decided_speedup) AS best_decided_speedup,
    arg_max(p.run_id || '/' || p.candidate_id, p.decided_speedup) AS best_decided_candidate,
    sum(r.cost_usd) AS cost_usd
FROM runs r
LEFT JOIN (
    SELECT * FROM promoted QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY decided_speedup DESC, candidate_id) = 1
) p ON p.run_id = r.run_id
GROUP BY r.kernel_id, r.bundle_digest, r.device_kind
