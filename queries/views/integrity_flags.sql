-- Every guard or tripwire that fired on a candidate; blocking: the candidate was refused (else
-- extra verification was triggered).
SELECT
    run_id,
    payload ->> 'candidate_id' AS candidate_id,
    payload ->> 'guard' AS guard,
    payload ->> 'detail' AS detail,
    CAST(payload ->> 'blocking' AS BOOLEAN) AS blocking,
    recorded_at,
    seq AS event_seq
FROM events
WHERE type = 'IntegrityFlagged'
