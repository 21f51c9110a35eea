-- Every attempt to commit a winner.
SELECT
    run_id,
    payload ->> 'candidate_id' AS candidate_id,
    payload ->> 'vcs' AS vcs,
    CAST(payload ->> 'success' AS BOOLEAN) AS success,
    CAST(payload ->> 'conflict' AS BOOLEAN) AS conflict,
    payload ->> 'rev_before' AS rev_before,
    payload ->> 'rev_after' AS rev_after,
    payload ->> 'subject' AS subject,
    payload ->> 'diagnostics' AS diagnostics,
    recorded_at
FROM events
WHERE type = 'CommitAttempted'
