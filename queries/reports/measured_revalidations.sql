-- Every final revalidation (FinalistRevalidated) of a candidate under one measurement identity,
-- in any run, oldest first: the revalidation rows of source_measurements, which source_estimates
-- pools with the decisions; the provider context carries them beside each decision
-- (queries.lookups.revalidations) so that a provider pools the same measurements.
SELECT run_id, candidate_id, speedup, ci_low, ci_high
FROM source_measurements
WHERE kind = 'revalidation' AND measurement_key = $measurement_key
ORDER BY measured_at, run_id, event_seq
