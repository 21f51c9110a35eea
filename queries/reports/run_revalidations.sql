-- The final revalidations.
SELECT * FROM revalidations WHERE run_id = $run_id ORDER BY event_seq
