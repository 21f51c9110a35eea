-- The configurations nearest_history ranks for one run, nearest first (at most $limit), read with
-- the view's parameters bound (queries.bound_report): the run, and the runs its first rows come
-- from and their measurement keys, as nearest_reach found them.
SELECT * EXCLUDE (run_id) FROM nearest_history ORDER BY rank LIMIT $limit
