-- Event ids of the new events that the store already holds elsewhere.
SELECT e.event_id, e.run_id, e.seq FROM events e SEMI JOIN new_events n ON e.event_id = n.event_id
