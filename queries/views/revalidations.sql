-- Every final revalidation: a finalist measured again against a fresh baseline, interleaved
-- (A B A B), and whether it survived.
SELECT
    run_id,
    payload ->> 'candidate_id' AS candidate_id,
    CAST(payload ->> 'survived' AS BOOLEAN) AS survived,
    payload ->> 'reason' AS reason,
    CAST(payload ->> 'speedup' AS DOUBLE) AS revalidated_speedup,
    CAST(payload ->> 'ci_low' AS DOUBLE) AS ci_low,
    CAST(payload ->> 'ci_high' AS DOUBLE) AS ci_high,
    CAST(payload ->> 'alternations' AS INTEGER) AS alternations,
    recorded_at,
    seq AS event_seq
FROM events
WHERE type = 'FinalistRevalidated'
