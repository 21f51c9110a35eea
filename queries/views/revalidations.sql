-- Every final revalidation: a finalist measured again against a fresh baseline, interleaved
-- (A B A B), and whether it survived.
SELECT
    run_id,
    candidate_id,
    survived,
    reason,
    speedup AS revalidated_speedup,
    ci_low,
    ci_high,
    alternations,
    recorded_at,
    seq AS event_seq
FROM proj_revalidations
