-- Every request to a model or agent and its reply.
SELECT
    run_id,
    payload ->> 'exchange_id' AS exchange_id,
    payload ->> 'provider' AS provider,
    payload ->> 'model' AS model,
    TRY_CAST(payload ->> 'attempt' AS INTEGER) AS attempt,
    payload ->> 'prompt' AS prompt,
    payload ->> 'reply' AS reply,
    payload ->> 'error' AS error,
    TRY_CAST(payload ->> 'tokens_in' AS BIGINT) AS tokens_in,
    TRY_CAST(payload ->> 'tokens_out' AS BIGINT) AS tokens_out,
    TRY_CAST(payload ->> 'cost_usd' AS DOUBLE) AS cost_usd,
    TRY_CAST(payload ->> 'latency_ms' AS DOUBLE) AS latency_ms,
    recorded_at
FROM events
WHERE type = 'ModelExchanged'
