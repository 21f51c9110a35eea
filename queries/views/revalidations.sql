-- Every final revalidation: a finalist measured again against a fresh baseline, alternated in one
-- window, and whether it survived. A run revalidates its finalists in turn (the winner chain) until
-- one survives: event_seq orders them. notes: what qualified a survival (a noisy case).
SELECT
    r.run_id,
    r.candidate_id,
    r.survived,
    r.reason,
    r.speedup AS revalidated_speedup,
    r.ci_low,
    r.ci_high,
    r.alternations,
    coalesce(n.notes, []) AS notes,
    r.recorded_at,
    r.seq AS event_seq
FROM proj_revalidations r
LEFT JOIN (
    SELECT run_id, event_seq, list(note ORDER BY note_index) AS notes FROM proj_notes WHERE stage = 'revalidation'
    GROUP BY run_id, event_seq
) n ON n.run_id = r.run_id AND n.event_seq = r.seq
