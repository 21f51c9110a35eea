-- The environments of the runs a report compares side by side (each run's first: at its start).
SELECT * FROM run_environments WHERE list_contains($run_ids, run_id) ORDER BY recorded_at, run_id
