-- The attempts to commit the winner.
SELECT * FROM commits WHERE run_id = $run_id ORDER BY recorded_at
