-- Store schema v11 -> v12, in its own transaction (tlxstore/store/schema.py: upgrade): a run's
-- candidate count (proj_run_candidates.candidates, the `runs` view's `candidates`) leaves the
-- baseline aside, as the result JSON's experiments and the live log do: `tlxdb runs` read 13 for a
-- run of 12 candidates. Each run that proposed its baseline counted it once.
UPDATE proj_run_candidates SET candidates = candidates - 1
WHERE run_id IN (SELECT run_id FROM proj_candidates WHERE candidate_id = 'baseline');
UPDATE tlxdb_meta SET value = '12' WHERE key = 'store_schema_version';
