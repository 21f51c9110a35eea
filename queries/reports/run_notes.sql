-- What qualified each decision of the run: noisy cases, calls left out, host-bound cases.
SELECT candidate_id, outcome, notes FROM decisions WHERE run_id = $run_id AND len(notes) > 0 ORDER BY decided_at, candidate_id
