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
-- (Each kind of measurement is read per run, through a lateral join from its runs' identity: a
-- filter on the kernel, bundle or device keeps a few runs, and their ids reach the scans of the
-- big tables.)
WITH measured AS (
    SELECT
        i.kernel_id, i.entry_point, i.kernel_file, i.bundle_digest, i.device_kind,
        i.measurement_key, i.baseline_source_hash, d.source_hash, d.run_id, d.candidate_id,
        d.decided_at AS measured_at, d.outcome = 'promoted' AS promoted, d.speedup, d.ci_low,
        d.ci_high
    FROM run_identity i
    JOIN LATERAL (
        SELECT * FROM proj_decisions
        WHERE run_id = i.run_id AND outcome IN ('promoted', 'rejected') AND round > 0
    ) d ON true
    UNION ALL
    SELECT
        i.kernel_id, i.entry_point, i.kernel_file, i.bundle_digest, i.device_kind,
        i.measurement_key, i.baseline_source_hash, c.source_hash, v.run_id, v.candidate_id,
        v.recorded_at, false, v.speedup, v.ci_low, v.ci_high
    FROM run_identity i
    JOIN proj_revalidations v ON v.run_id = i.run_id
    JOIN LATERAL (
        SELECT source_hash FROM proj_candidates
        WHERE run_id = v.run_id AND candidate_id = v.candidate_id
    ) c ON true
),
m AS (
    SELECT
        * EXCLUDE (speedup, ci_low, ci_high),
        ln(speedup) AS log_speedup,
        CASE WHEN ci_low > 0 AND ci_high >= ci_low AND isfinite(ci_high)
            THEN greatest((ln(ci_high) - ln(ci_low)) / (2 * 2.5758), 0.001)
        END AS se
    FROM measured
    WHERE speedup > 0 AND isfinite(speedup) AND source_hash IS NOT NULL
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
