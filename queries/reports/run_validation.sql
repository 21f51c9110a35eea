-- The bundle's validation checks of the run, in the order they ran.
SELECT * FROM validation_checks WHERE run_id = $run_id ORDER BY event_seq
