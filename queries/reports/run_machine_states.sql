-- The run's benchmark calls that ran while the GPU throttled or was shared (left out of every decision).
SELECT * FROM machine_states WHERE run_id = $run_id AND marked ORDER BY event_seq
