-- Every evaluation that could not finish for a reason outside the candidate (timeouts, crashes,
-- device faults, provider errors) or a harness error; retryable ones never burn a source hash.
SELECT
    run_id,
    payload ->> 'candidate_id' AS candidate_id,
    payload ->> 'stage' AS stage,
    payload ->> 'kind' AS kind,
    CAST(payload ->> 'retryable' AS BOOLEAN) AS retryable,
    payload ->> 'diagnostics' AS diagnostics,
    recorded_at,
    seq AS event_seq
FROM events
WHERE type = 'InfrastructureFailed'
