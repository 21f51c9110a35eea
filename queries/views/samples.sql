-- One row per benchmark sample (microseconds), in recorded order within its event.
SELECT run_id, candidate_id, case_id, phase, block, sample_index, sample_us, event_seq
FROM proj_samples
