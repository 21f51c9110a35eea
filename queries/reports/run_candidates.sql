-- Every candidate with what it tried, what it cost and its decision (with the notes that qualified
-- it), in proposal order.
SELECT c.*, coalesce(d.notes, []) AS notes
FROM candidates c
LEFT JOIN decisions d
    ON d.run_id = c.run_id AND d.candidate_id = c.candidate_id AND d.decided_at = c.decided_at
WHERE c.run_id = $run_id
ORDER BY c.proposed_at, c.candidate_id
