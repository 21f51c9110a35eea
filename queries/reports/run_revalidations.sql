-- The final revalidations: the winner chain, in the order its finalists were revalidated.
SELECT * FROM revalidations WHERE run_id = $run_id ORDER BY event_seq
