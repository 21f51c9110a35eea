-- The guards and tripwires that fired.
SELECT * FROM integrity_flags WHERE run_id = $run_id ORDER BY event_seq
