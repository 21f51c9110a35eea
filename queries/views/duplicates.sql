-- Every candidate found to be a duplicate of one measured before (raw or normalized source hash,
-- same measurement identity), with the original's outcome and decided speedup.
WITH found AS (
    SELECT
        run_id,
        seq,
        recorded_at,
        payload ->> 'candidate_id' AS candidate_id,
        payload ->> 'match' AS match,
        payload ->> 'duplicate_of_run' AS duplicate_of_run,
        payload ->> 'duplicate_of_candidate' AS duplicate_of_candidate
    FROM events
    WHERE type = 'DuplicateDetected'
)
SELECT
    e.run_id,
    e.candidate_id,
    e.match,
    e.duplicate_of_run,
    e.duplicate_of_candidate,
    e.duplicate_of_run = e.run_id AS same_run,
    o.outcome AS original_outcome,
    o.speedup AS original_decided_speedup,
    e.recorded_at AS detected_at
FROM found e
-- the original's last decision: only the originals' decisions are read (not every decision's window)
LEFT JOIN proj_decisions o ON o.run_id = e.duplicate_of_run AND o.candidate_id = e.duplicate_of_candidate
QUALIFY row_number() OVER (PARTITION BY e.run_id, e.seq ORDER BY o.seq DESC NULLS LAST) = 1
