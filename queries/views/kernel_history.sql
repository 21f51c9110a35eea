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
    max(p.decided_speedup) AS best_decided_speedup,
    arg_max(p.run_id || '/' || p.candidate_id, p.decided_speedup) AS best_decided_candidate,
    sum(r.cost_usd) AS cost_usd
FROM runs r
-- each run's best promoted candidate (its last decision promoted it, as `candidates` has it),
-- joined laterally: read for the runs a filter on the view keeps, not for every run
LEFT JOIN LATERAL (
    SELECT r.run_id, candidate_id, d.speedup AS decided_speedup
    FROM (
        SELECT candidate_id, arg_max({'outcome': outcome, 'speedup': speedup}, seq) AS d
        FROM proj_decisions
        WHERE run_id = r.run_id AND source_key IS NOT NULL  -- a decision of a proposed candidate
        GROUP BY candidate_id
    )
    WHERE d.outcome = 'promoted' AND candidate_id <> 'baseline' AND d.speedup IS NOT NULL
    ORDER BY d.speedup DESC, candidate_id
    LIMIT 1
) p ON true
GROUP BY r.kernel_id, r.entry_point, r.kernel_file, r.bundle_digest, r.device_kind
