-- Every final revalidation (FinalistRevalidated) of a candidate under one measurement identity,
-- in any run, oldest first: each is a measurement of the candidate's source that
-- source_estimates pools with its decision, and the provider context carries it beside the
-- decision (queries.lookups.revalidations) so that a provider pools the same measurements.
SELECT v.run_id, v.candidate_id, v.speedup, v.ci_low, v.ci_high
FROM run_identity i
JOIN proj_revalidations v ON v.run_id = i.run_id
WHERE i.measurement_key = $measurement_key AND v.candidate_id IS NOT NULL
    AND v.speedup > 0 AND isfinite(v.speedup)
ORDER BY v.recorded_at, v.run_id, v.seq
