-- `tlxdb runs`: the runs, newest first.
SELECT run_id, status, started_at, finished_at, kernel_id, stopping_reason, success, winner_id, revalidated_speedup, candidates, events, device_kind, provider, label
FROM runs
ORDER BY started_at DESC NULLS LAST, run_id DESC
