-- Every candidate with what it tried, what it cost and its decision, in proposal order.
SELECT * FROM candidates WHERE run_id = $run_id ORDER BY proposed_at, candidate_id
