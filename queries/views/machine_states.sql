-- The GPU's state during each harness benchmark call (MachineSampled), beside the call's samples:
-- which samples were taken while the GPU throttled or was shared? throttled: a degrading clocks
-- event reason was set in a reading (hardware slowdown, thermal slowdown, power brake: the list of
-- optimizer/decision/machine.py, DEGRADING_REASONS; the software power cap is not one); shared:
-- another process was on the GPU; marked: either, and every decision left the call's samples out.
SELECT
    m.run_id, m.candidate_id, m.case_id, m.phase, m.window_id, m.block, m.readings, m.duration_ms,
    m.sm_clock_min_mhz, m.sm_clock_median_mhz, m.sm_clock_max_mhz, m.mem_clock_min_mhz, m.mem_clock_median_mhz,
    m.power_median_w, m.power_max_w, m.temperature_max_c, m.reasons, m.neighbours, m.throttled, m.shared,
    m.throttled OR m.shared AS marked, s.samples_us, m.source, m.event_seq, m.instance
FROM (
    SELECT *,
        list_has_any(json_keys(reasons), ['hw_slowdown', 'sw_thermal_slowdown', 'hw_thermal_slowdown',
            'hw_power_brake_slowdown']) AS throttled,
        coalesce(json_array_length(neighbours), 0) > 0 AS shared
    FROM proj_machine
) m
LEFT JOIN (
    SELECT run_id, candidate_id, case_id, phase, window_id, block, instance,
        list(sample_us ORDER BY event_seq, sample_index) AS samples_us
    FROM proj_samples
    GROUP BY ALL
) s ON s.run_id = m.run_id AND s.candidate_id = m.candidate_id AND s.case_id = m.case_id AND s.phase = m.phase
    AND s.window_id IS NOT DISTINCT FROM m.window_id AND s.block = m.block AND s.instance = m.instance
