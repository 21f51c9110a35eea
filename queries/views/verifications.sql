-- Every correctness check of one case of a candidate (attempts numbered; the last one follows the
-- benchmark), with its metrics (JSON: name -> value, NULL when unknown).
SELECT
    run_id,
    payload ->> 'candidate_id' AS candidate_id,
    payload ->> 'case_id' AS case_id,
    TRY_CAST(payload ->> 'passed' AS BOOLEAN) AS passed,
    coalesce(payload ->> 'phase', 'round') AS phase,
    TRY_CAST(coalesce(payload ->> 'attempt', '1') AS INTEGER) AS attempt,
    TRY_CAST(payload ->> 'seed' AS BIGINT) AS seed,
    payload ->> 'diagnostics' AS diagnostics,
    CAST(payload -> 'metrics' AS JSON) AS metrics,
    recorded_at,
    seq AS event_seq
FROM events
WHERE type = 'CaseVerified'
