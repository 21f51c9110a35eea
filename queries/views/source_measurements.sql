-- Every measurement of a source, one row each, with the identity of the run that made it: a
-- DecisionMade that promoted or rejected a candidate with a speedup (kind 'decision'; round > 0:
-- the baseline is the unit, not a measurement; a duplicate repeats its original's figure and a
-- failure has none), or a FinalistRevalidated (kind 'revalidation'). source_estimates pools
-- these rows into one figure per source; the loop reads the revalidations of its measurement
-- identity from here (reports/measured_revalidations.sql), so tune and history pool the same
-- measurements. A row without a positive finite speedup, or without a source, is no measurement.
-- (Each kind is read per run, through a lateral join from its runs' identity: a filter on the
-- kernel, bundle, device or measurement key keeps a few runs, and their ids reach the scans of
-- the big tables.)
SELECT *
FROM (
    SELECT
        i.kernel_id, i.entry_point, i.kernel_file, i.bundle_digest, i.device_kind,
        i.measurement_key, i.baseline_source_hash, d.source_hash, d.run_id, d.candidate_id,
        'decision' AS kind, d.decided_at AS measured_at, d.seq AS event_seq,
        d.outcome = 'promoted' AS promoted, d.speedup, d.ci_low, d.ci_high
    FROM run_identity i
    JOIN LATERAL (
        SELECT * FROM proj_decisions
        WHERE run_id = i.run_id AND outcome IN ('promoted', 'rejected') AND round > 0
    ) d ON true
    UNION ALL
    SELECT
        i.kernel_id, i.entry_point, i.kernel_file, i.bundle_digest, i.device_kind,
        i.measurement_key, i.baseline_source_hash, c.source_hash, v.run_id, v.candidate_id,
        'revalidation', v.recorded_at, v.seq, false, v.speedup, v.ci_low, v.ci_high
    FROM run_identity i
    JOIN proj_revalidations v ON v.run_id = i.run_id
    JOIN LATERAL (
        SELECT source_hash FROM proj_candidates
        WHERE run_id = v.run_id AND candidate_id = v.candidate_id
    ) c ON true
)
WHERE speedup > 0 AND isfinite(speedup) AND source_hash IS NOT NULL
