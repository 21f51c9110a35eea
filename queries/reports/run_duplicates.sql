-- The duplicates and the results they reused.
SELECT * FROM duplicates WHERE run_id = $run_id ORDER BY detected_at
