-- One row per candidate and case: the roofline point (time, bytes and flops with where each came
-- from, achieved fractions of the device's measured ceilings, the bound) and the three clocks
-- (benchmark median, Proton's main kernel per launch, ncu's main-kernel duration) with the
-- disagreement between them; NULL where unknown.
SELECT
    e.run_id,
    e.payload ->> 'candidate_id' AS candidate_id,
    e.payload ->> 'case_id' AS case_id,
    TRY_CAST(e.payload ->> 'time_us' AS DOUBLE) AS time_us,
    e.payload ->> 'time_source' AS time_source,
    TRY_CAST(e.payload ->> 'bytes_moved' AS DOUBLE) AS bytes_moved,
    e.payload ->> 'bytes_source' AS bytes_source,
    TRY_CAST(e.payload ->> 'flops' AS DOUBLE) AS flops,
    e.payload ->> 'flops_source' AS flops_source,
    TRY_CAST(e.payload ->> 'achieved_bytes_per_s' AS DOUBLE) AS achieved_bytes_per_s,
    TRY_CAST(e.payload ->> 'achieved_flop_per_s' AS DOUBLE) AS achieved_flop_per_s,
    TRY_CAST(e.payload ->> 'bandwidth_fraction' AS DOUBLE) AS bandwidth_fraction,
    TRY_CAST(e.payload ->> 'compute_fraction' AS DOUBLE) AS compute_fraction,
    TRY_CAST(e.payload ->> 'arithmetic_intensity' AS DOUBLE) AS arithmetic_intensity,
    e.payload ->> 'bound' AS bound,
    TRY_CAST(e.payload ->> 'benchmark_median_us' AS DOUBLE) AS benchmark_median_us,
    TRY_CAST(e.payload ->> 'proton_main_us' AS DOUBLE) AS proton_main_us,
    TRY_CAST(e.payload ->> 'ncu_main_us' AS DOUBLE) AS ncu_main_us,
    NULLIF(e.payload ->> 'disagreement', '') AS disagreement,
    e.seq AS event_seq
FROM events e
WHERE e.type = 'RooflineAssessed'
