-- Every build of a candidate: whether it compiled, how long it took (ms) and what it said.
SELECT
    run_id,
    payload ->> 'candidate_id' AS candidate_id,
    CAST(payload ->> 'success' AS BOOLEAN) AS success,
    CAST(payload ->> 'duration_ms' AS DOUBLE) AS duration_ms,
    payload ->> 'diagnostics' AS diagnostics,
    recorded_at,
    seq AS event_seq
FROM events
WHERE type = 'BuildFinished'
