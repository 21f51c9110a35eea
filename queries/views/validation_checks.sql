-- Every check of a run's bundle validation, one row each: pass, warn or fail (docs/VALIDATION.md).
-- strict: the run made warnings failures (--strict-validation); such a check has outcome 'fail'
-- and warning true.
SELECT
    e.run_id,
    c.name AS check_name,
    CASE WHEN NOT c.passed THEN 'fail' WHEN coalesce(c.warning, false) THEN 'warn' ELSE 'pass' END
        AS outcome,
    coalesce(c.warning, false) AS warning,
    c.detail,
    coalesce(CAST(e.payload ->> 'strict' AS BOOLEAN), false) AS strict,
    e.recorded_at,
    e.seq AS event_seq
FROM events e,
    unnest(from_json(e.payload -> 'checks', '[{"name":"VARCHAR","passed":"BOOLEAN","detail":"VARCHAR","warning":"BOOLEAN"}]')) AS t(c)
WHERE e.type = 'BundleValidated'
