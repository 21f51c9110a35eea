-- Its thresholds, prior runs and what it resumed.
SELECT * FROM run_settings WHERE run_id = $run_id
