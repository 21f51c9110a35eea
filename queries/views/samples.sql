-- One row per benchmark sample (microseconds), in recorded order within its event. window_id: the
-- evaluation it was measured in, beside the other candidates of that window (a reference's samples
-- carry the window of the candidate they were measured beside); NULL: measured alone (before v6).
-- instance: which build of the source in its window (a second window measures several; 1: the first).
SELECT run_id, candidate_id, case_id, phase, block, sample_index, sample_us, event_seq, window_id, instance
FROM proj_samples
