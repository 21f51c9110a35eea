-- Events of the batch's runs already in the store at the batch's sequence numbers.
SELECT e.run_id, e.seq, e.event_id, e.body_digest
FROM events e
JOIN (SELECT run_id, min(seq) AS lo, max(seq) AS hi FROM batch_events GROUP BY run_id) b
  ON e.run_id = b.run_id AND e.seq BETWEEN b.lo AND b.hi
