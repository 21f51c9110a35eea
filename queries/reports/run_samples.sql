-- The raw samples (us), for the distributions.
SELECT candidate_id, case_id, phase, sample_us FROM samples WHERE run_id = $run_id
