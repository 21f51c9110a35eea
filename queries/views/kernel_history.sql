-- The best ever per kernel x bundle x device: how many runs tried it, when, and the best final
-- (revalidated) speedup of a run's winner with its run, candidate and source hash; beside it the
-- best decided speedup of any promoted candidate (before revalidation) and where it came from.
SELECT
    r.kernel_id,
    r.entry_point,
    r.kernel_file,
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
    max(p.best_speedup) AS best_decided_speedup,
    -- on a tie, the first run (run ids begin with the time they started), as a run's own best
    -- is its first candidate on a tie
    first(p.run_id || '/' || p.best_candidate_id ORDER BY p.best_speedup DESC, p.run_id)
        FILTER (WHERE p.best_speedup IS NOT NULL) AS best_decided_candidate,
    sum(r.cost_usd) AS cost_usd
FROM runs r
-- each run's best promoted candidate (its last decision promoted it, as `candidates` has it), as
-- the projection passes keep it: no run's decisions are read here
LEFT JOIN proj_run_candidates p ON p.run_id = r.run_id
GROUP BY r.kernel_id, r.entry_point, r.kernel_file, r.bundle_digest, r.device_kind
