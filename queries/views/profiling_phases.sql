-- Each candidate's profiling, one row per tool (Proton's attribution, ncu's set): what it took
-- and how much of the candidate's wall time waited for it (ProfilingFinished).
SELECT
    e.run_id,
    e.payload ->> 'candidate_id' AS candidate_id,
    e.payload ->> 'tool' AS tool,
    e.payload ->> 'level' AS level,
    TRY_CAST(e.payload ->> 'cases' AS INTEGER) AS cases,
    TRY_CAST(e.payload ->> 'wall_ms' AS DOUBLE) AS wall_ms,
    TRY_CAST(e.payload ->> 'waited_ms' AS DOUBLE) AS waited_ms,
    e.recorded_at,
    e.seq AS event_seq
FROM events e
WHERE e.type = 'ProfilingFinished'
