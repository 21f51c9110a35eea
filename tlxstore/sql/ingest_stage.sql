-- Stored events at the (run, seq) slots of the incoming batch (Arrow table `incoming`), and
-- whether each is the same event: same id and the same body (every record field). Run only when
-- some incoming seq is below its run's head (a re-ingest); otherwise nothing can be taken.
CREATE OR REPLACE TEMPORARY TABLE taken AS
SELECT
    i.run_id,
    i.seq,
    i.event_id AS new_id,
    e.event_id AS stored_id,
    (i.recorded_at = e.recorded_at AND i.type = e.type AND i.schema_version = e.schema_version
        AND i.payload = e.payload) AS same_body
FROM incoming i
JOIN events e ON e.run_id = i.run_id AND e.seq = i.seq
WHERE i.run_id IN (SELECT run_id FROM run_heads WHERE list_contains($behind, run_id));
