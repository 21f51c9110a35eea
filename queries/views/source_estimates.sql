-- One pooled speedup per source: every measurement of one source (raw source hash) under one
-- measurement key and against one baseline source, in any run, combined into one speedup with
-- one 99% CI (optimizer/decision/pooling.py computes the same; a test holds the two equal). A
-- measurement is a DecisionMade that promoted or rejected a candidate with a speedup, or a
-- FinalistRevalidated. Pooled: the inverse-variance weighted mean of the log speedups, each
-- measurement's standard error read from its 99% CI, se = (ln ci_high - ln ci_low) / (2 * 2.5758),
-- floored at 0.001; CI exp(mean -/+ 2.5758 / sqrt(sum of the weights)). Measurements without a CI
-- (imported TLX agent runs) are set aside where others of the source have one (set_aside counts
-- them); where none has one, pooled_speedup is their geometric mean and the CI is NULL.
-- measurements: how many the figure pools; promotions: how many of its decisions promoted it
-- (kernel_history names a best source only among promoted ones: a source every run rejected, for
-- noise say, is no best); runs: the runs that measured the source. A group is
-- also named by its kernel (kernel_id, entry point, normalized path), bundle and device, as
-- history groups runs: one baseline source at two paths is two kernels there.
WITH measured AS (
    SELECT run_id, candidate_id, source_hash, speedup, ci_low, ci_high, decided_at AS measured_at,
        outcome = 'promoted' AS promoted
    FROM proj_decisions
    WHERE outcome IN ('promoted', 'rejected') AND round > 0
    UNION ALL
    SELECT v.run_id, v.candidate_id, c.source_hash, v.speedup, v.ci_low, v.ci_high, v.recorded_at,
        false
    FROM proj_revalidations v
    JOIN proj_candidates c ON c.run_id = v.run_id AND c.candidate_id = v.candidate_id
),
m AS (
    SELECT
        i.kernel_id, i.entry_point, i.kernel_file, i.bundle_digest, i.device_kind,
        i.measurement_key, i.baseline_source_hash, x.source_hash, x.run_id, x.candidate_id,
        x.measured_at, x.promoted, ln(x.speedup) AS log_speedup,
        CASE WHEN x.ci_low > 0 AND x.ci_high >= x.ci_low AND isfinite(x.ci_high)
            THEN greatest((ln(x.ci_high) - ln(x.ci_low)) / (2 * 2.5758), 0.001)
        END AS se
    FROM measured x
    JOIN run_identity i ON i.run_id = x.run_id
    WHERE x.speedup > 0 AND isfinite(x.speedup) AND x.source_hash IS NOT NULL
),
g AS (
    SELECT
        kernel_id, entry_point, kernel_file, bundle_digest, device_kind, measurement_key,
        baseline_source_hash, source_hash,
        count(se) AS with_ci,
        count(*) AS n,
        -- each sum over its values in order: a parallel sum adds them in any order, and the
        -- same store would give figures that differ in the last bits from one query to the next
        list_sum(list(log_speedup / (se * se) ORDER BY log_speedup / (se * se)))
            / list_sum(list(1 / (se * se) ORDER BY se)) AS weighted_mean,
        sqrt(list_sum(list(1 / (se * se) ORDER BY se))) AS precision,
        list_sum(list(log_speedup ORDER BY log_speedup)) / count(*) AS plain_mean,
        count(*) FILTER (WHERE promoted) AS promotions,
        count(DISTINCT run_id) AS runs,
        first(run_id ORDER BY measured_at, run_id, candidate_id) AS first_run_id,
        first(candidate_id ORDER BY measured_at, run_id, candidate_id) AS first_candidate_id,
        max(measured_at) AS last_measured_at
    FROM m
    GROUP BY ALL
)
SELECT
    kernel_id,
    entry_point,
    kernel_file,
    bundle_digest,
    device_kind,
    measurement_key,
    baseline_source_hash,
    source_hash,
    exp(CASE WHEN with_ci > 0 THEN weighted_mean ELSE plain_mean END) AS pooled_speedup,
    CASE WHEN with_ci > 0 THEN exp(weighted_mean - 2.5758 / precision) END AS ci_low,
    CASE WHEN with_ci > 0 THEN exp(weighted_mean + 2.5758 / precision) END AS ci_high,
    CASE WHEN with_ci > 0 THEN with_ci ELSE n END AS measurements,
    n - (CASE WHEN with_ci > 0 THEN with_ci ELSE n END) AS set_aside,
    promotions,
    runs,
    first_run_id,
    first_candidate_id,
    last_measured_at
FROM g
