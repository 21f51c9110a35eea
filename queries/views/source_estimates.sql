-- One pooled speedup per source: every measurement of one source (raw source hash) under one
-- measurement key and against one baseline source, in any run, combined into one speedup with
-- one 99% CI (optimizer/decision/pooling.py computes the same; a test holds the two equal). The
-- measurements are the rows of source_measurements (decisions and final revalidations). Pooled:
-- the inverse-variance weighted mean of the log speedups, each measurement's standard error
-- read from its 99% CI, se = (ln ci_high - ln ci_low) / (2 * 2.5758),
-- floored at 0.001; CI exp(mean -/+ 2.5758 / sqrt(sum of the weights)). Measurements without a CI
-- (imported TLX agent runs) are set aside where others of the source have one (set_aside counts
-- them); where none has one, pooled_speedup is their geometric mean and the CI is NULL.
-- measurements: how many the figure pools; promotions: how many of its decisions promoted it
-- (kernel_history names a best source only among promoted ones: a source every run rejected, for
-- noise say, is no best); runs: the runs that measured the source. A group is
-- also named by its kernel (kernel_id, entry point, normalized path), bundle and device, as
-- history groups runs: one baseline source at two paths is two kernels there.
WITH m AS (
    SELECT
        * EXCLUDE (speedup, ci_low, ci_high),
        ln(speedup) AS log_speedup,
        CASE WHEN ci_low > 0 AND ci_high >= ci_low AND isfinite(ci_high)
            THEN greatest((ln(ci_high) - ln(ci_low)) / (2 * 2.5758), 0.001)
        END AS se
    FROM source_measurements
),
g AS (
    SELECT
        kernel_id, entry_point, kernel_file, bundle_digest, device_kind, measurement_key,
        baseline_source_hash, source_hash,
        count(se) AS with_ci,
        count(*) AS n,
        -- each sum exact, in DECIMAL: a parallel sum of doubles adds them in any order, and the
        -- same store would give figures that differ in the last bits from one query to the next
        sum((log_speedup / (se * se))::DECIMAL(38, 18))::DOUBLE
            / sum((1 / (se * se))::DECIMAL(38, 18))::DOUBLE AS weighted_mean,
        sqrt(sum((1 / (se * se))::DECIMAL(38, 18))::DOUBLE) AS precision,
        sum(log_speedup::DECIMAL(38, 18))::DOUBLE / count(*) AS plain_mean,
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
