-- How each run was set up: its thresholds (after flags and budget.json), the prior runs it
-- learned from, what it resumed, its command line, case weights and protected cases.
SELECT
    run_id,
    p.thresholds.max_rounds AS max_rounds,
    p.thresholds.candidates_per_round AS candidates_per_round,
    p.thresholds.max_candidate_seconds AS max_candidate_seconds,
    p.thresholds.max_total_seconds AS max_total_seconds,
    p.thresholds.min_speedup AS min_speedup,
    p.thresholds.max_cv AS max_cv,
    p.thresholds.benchmark_repetitions AS benchmark_repetitions,
    -- a v1 RunStarted records neither: it measured no extra block and kept the TLX agent's CV
    -- gate (as tlxstore/upcasting.py reads it)
    coalesce(p.thresholds.max_extra_blocks, 0) AS max_extra_blocks,
    coalesce(p.thresholds.strict_noise, true) AS strict_noise,
    -- a v1/v2 RunStarted records none: it seeded nothing from the nearest history
    coalesce(p.thresholds.history_seeds, 0) AS history_seeds,
    p.prior_runs AS prior_runs,
    p.resumed_from AS resumed_from,
    p.argv AS argv,
    CAST(payload -> 'case_weights' AS JSON) AS case_weights,
    p.protected_cases AS protected_cases,
    CAST(payload -> 'bundle_files' AS JSON) AS bundle_files
FROM (
    SELECT run_id, payload, from_json(payload, '{"thresholds": {"max_rounds": "INTEGER", "candidates_per_round": "INTEGER",
        "max_candidate_seconds": "DOUBLE", "max_total_seconds": "DOUBLE", "min_speedup": "DOUBLE", "max_cv": "DOUBLE",
        "benchmark_repetitions": "INTEGER", "max_extra_blocks": "INTEGER", "strict_noise": "BOOLEAN",
        "history_seeds": "INTEGER"}, "prior_runs": ["VARCHAR"], "resumed_from": "VARCHAR", "argv": ["VARCHAR"],
        "protected_cases": ["VARCHAR"]}') AS p
    FROM events WHERE type = 'RunStarted'
)
