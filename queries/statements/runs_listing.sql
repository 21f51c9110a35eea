-- `tlxdb runs`: the runs, newest first.
SELECT run_id, started_at, finished_at, stopping_reason, success, winner_id, speedup, candidates, events, device_kind, provider, label
FROM runs
ORDER BY started_at DESC NULLS LAST, run_id DESC
