-- Every candidate found to be a duplicate of one measured before (raw or normalized source hash,
-- same measurement identity), with the original's outcome and decided speedup.
SELECT
    e.run_id,
    e.payload ->> 'candidate_id' AS candidate_id,
    e.payload ->> 'match' AS match,
    e.payload ->> 'duplicate_of_run' AS duplicate_of_run,
    e.payload ->> 'duplicate_of_candidate' AS duplicate_of_candidate,
    (e.payload ->> 'duplicate_of_run') = e.run_id AS same_run,
    o.outcome AS original_outcome,
    o.speedup AS original_decided_speedup,
    e.recorded_at AS detected_at
FROM events e
LEFT JOIN (
    SELECT run_id, candidate_id, outcome, speedup FROM proj_decisions
    QUALIFY row_number() OVER (PARTITION BY run_id, candidate_id ORDER BY seq DESC) = 1
) o ON o.run_id = (e.payload ->> 'duplicate_of_run') AND o.candidate_id = (e.payload ->> 'duplicate_of_candidate')
WHERE e.type = 'DuplicateDetected'
