-- Profile metrics in long format: one row per metric; value NULL when the tool could not read it.
SELECT
    e.run_id,
    e.payload ->> 'candidate_id' AS candidate_id,
    e.payload ->> 'case_id' AS case_id,
    m.name AS metric,
    m.value,
    m.unit,
    m.source,
    e.seq AS event_seq
FROM events e,
    unnest(from_json(e.payload -> 'metrics', '[{"name":"VARCHAR","value":"DOUBLE","unit":"VARCHAR","source":"VARCHAR"}]')) AS t(m)
WHERE e.type = 'ProfileCollected'
