-- The configurations nearest_history ranks for one run, nearest first (at most $limit); a run
-- the store holds but with no nearest history gives one row of NULLs, an unknown run none.
SELECT n.* EXCLUDE (run_id)
FROM (SELECT run_id FROM proj_runs WHERE run_id = $run_id) r
LEFT JOIN nearest_history n ON n.run_id = r.run_id
ORDER BY n.rank
LIMIT $limit
