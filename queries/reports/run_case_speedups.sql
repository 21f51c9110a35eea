-- The per-case figures of every decision and revalidation.
SELECT * FROM case_speedups WHERE run_id = $run_id ORDER BY event_seq, case_id
