-- Per-case figures behind each speedup: one row per case of every decision (stage 'decision')
-- and of every final revalidation (stage 'revalidation'): weight, baseline and candidate medians
-- (us), p95s, CVs and the case's speedup (baseline median / candidate median).
SELECT
    d.run_id,
    d.p.candidate_id AS candidate_id,
    d.stage,
    c.case_id,
    c.weight,
    c.baseline_median_us,
    c.candidate_median_us,
    c.speedup,
    c.baseline_p95_us,
    c.candidate_p95_us,
    c.baseline_cv,
    c.candidate_cv,
    d.event_seq
FROM (
    SELECT run_id, seq AS event_seq, CASE type WHEN 'DecisionMade' THEN 'decision' ELSE 'revalidation' END AS stage,
        from_json(payload, '{"candidate_id": "VARCHAR", "cases": [{"case_id": "VARCHAR", "weight": "DOUBLE",
            "baseline_median_us": "DOUBLE", "candidate_median_us": "DOUBLE", "speedup": "DOUBLE", "candidate_cv": "DOUBLE",
            "baseline_p95_us": "DOUBLE", "candidate_p95_us": "DOUBLE", "baseline_cv": "DOUBLE"}]}') AS p
    FROM events WHERE type IN ('DecisionMade', 'FinalistRevalidated')
) d, unnest(d.p.cases) AS t(c)
