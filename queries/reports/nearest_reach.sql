-- Which runs one run's first $limit nearest configurations come from, read before them
-- (nearest_configs binds what this finds): each source a run promoted counts at its nearest run
-- (nearest_runs), and the $limit-th of those distances bounds the first rows: every row no
-- farther is nearest_history's row, ranked there as among themselves, and every farther row ranks
-- after them. known: the store holds the run; from_runs: the runs within that distance that
-- promoted a source (a hair beyond it, 1e-9: sources is read twice, and an average taken in
-- parallel may differ in its last bits; reading more stays exact), empty where none did;
-- measurement_keys: theirs, whose estimates the rows pool.
WITH sources AS (
    SELECT n.from_run_id, n.from_measurement_key, n.distance, d.source_hash
    FROM nearest_runs n
    JOIN proj_decisions d ON d.run_id = n.from_run_id
    WHERE n.run_id = $run_id AND d.outcome = 'promoted' AND d.round > 0 AND d.speedup IS NOT NULL
),
reach AS (
    SELECT max(distance) + 1e-9 AS distance
    FROM (SELECT min(distance) AS distance FROM sources GROUP BY source_hash ORDER BY distance LIMIT $limit)
)
SELECT
    EXISTS (SELECT 1 FROM proj_runs WHERE run_id = $run_id) AS known,
    coalesce(list(DISTINCT s.from_run_id) FILTER (WHERE s.from_run_id IS NOT NULL), []) AS from_runs,
    coalesce(list(DISTINCT s.from_measurement_key) FILTER (WHERE s.from_run_id IS NOT NULL), [])
        AS measurement_keys
FROM reach
LEFT JOIN sources s ON s.distance <= reach.distance
