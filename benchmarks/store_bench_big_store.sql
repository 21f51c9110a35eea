-- A big store, generated in SQL (no Python loops): getvariable('runs') runs of
-- getvariable('cands') candidates, 2 cases x 5 samples each, getvariable('keys') measurement keys
-- (run r uses key r % keys, so one key spans runs/keys runs). Every candidate has 6 events:
-- SourceStored, CandidateProposed, BenchmarkSampled x2, DecisionMade, and ExclusionRecorded
-- (rejected/failed) or CaseVerified (promoted); a run that promoted ends with a FinalistRevalidated
-- of its first promoted candidate. Payloads are valid events (RunStarted v3, with its
-- bundle's case parameters, which nearest_runs compares; the rest v1), so the
-- generated runs fold like real ones; the projection tables are filled as ingest fills them
-- (tlx_key comes from tlxstore/sql/macros.sql, run first). Event ids are shaped as new_event_id makes
-- them (UUIDv7: 48 bits of the event's time in ms first), so they sort by time as live ones do; every
-- event gets its pos in the order it is inserted, and all of them count as projected.

CREATE TEMPORARY MACRO gen_id(ts, s) AS
    printf('%012x', epoch_ms(ts)) || '7' || substr(md5(s), 1, 3) || '8' || substr(md5(s), 4, 15);

-- the case parameters of bundle k (RunStarted.case_parameters): two cases whose shapes and dtype
-- vary with the bundle, as cases.json gives them
CREATE TEMPORARY MACRO gen_cases(k) AS printf(
    '{"small":{"n_rows":%d,"n_cols":%d,"dtype":"%s"},"large":{"n_rows":%d,"n_cols":%d,"dtype":"%s"}}',
    1 << (k % 7), 1 << (6 + k % 9), CASE WHEN k % 2 = 0 THEN 'float16' ELSE 'float32' END,
    1 << (4 + k % 5), 1 << (10 + k // 100), CASE WHEN k % 2 = 0 THEN 'float16' ELSE 'float32' END);

CREATE TEMPORARY TABLE gen AS
SELECT
    r, c,
    printf('rb%07d', r) AS run_id,
    printf('c%04d', c) AS candidate_id,
    'sha256:' || sha256('key' || (r % getvariable('keys'))) AS mk,
    'sha256:' || sha256('bundle' || (r % getvariable('keys'))) AS bundle,
    'sha256:' || sha256(printf('src:%d:%d', r, c)) AS source_hash,
    'sha256:' || sha256(printf('norm:%d:%d', r, c)) AS normalized_hash,
    1 + c * 6 AS seq0,
    CASE WHEN hash(r, c) % 100 < 5 THEN 'promoted' WHEN hash(r, c) % 100 < 65 THEN 'rejected' ELSE 'failed' END AS outcome,
    0.8 + (hash(c, r) % 4000) / 10000.0 AS speedup,
    TIMESTAMPTZ '2026-01-01 00:00:00+00' + to_minutes(CAST(r AS BIGINT)) + to_milliseconds(CAST(c AS BIGINT)) AS ts,
    32 * (1 + c % 32) AS block,
    1 << (c % 5) AS warps
FROM range(getvariable('runs')) a(r), range(getvariable('cands')) b(c)
ORDER BY r, c;  -- run by run, as ingest appends them

INSERT INTO events
SELECT * EXCLUDE (r), tlx_id_key(event_id), r FROM (
SELECT gen_id(TIMESTAMPTZ '2026-01-01 00:00:00+00' + to_minutes(CAST(r AS BIGINT)), printf('rb%07d', r) || '/0') AS event_id,
       printf('rb%07d', r), 0,
       TIMESTAMPTZ '2026-01-01 00:00:00+00' + to_minutes(CAST(r AS BIGINT)), 'RunStarted', 3,
       printf('{"argv":["tlxdb","optimize","--kernel","k.py"],"host":"bench-host","device":{"kind":"NVIDIA H200","backend":"cuda","architecture":"sm_90","num_sms":132,"l2_bytes":null},"tool_versions":{"tlxdb":"0.1.0","python":"3.12","triton":"3.6.0","torch":"2.11.0","cuda":null,"duckdb":null},"thresholds":{"max_rounds":5,"candidates_per_round":20,"max_candidate_seconds":600.0,"max_total_seconds":3600.0,"min_speedup":1.01,"max_cv":0.1,"benchmark_repetitions":10},"provider":"tune","model":null,"kernel_path":"/k/kernel.py","kernel_sha256":"%s","bundle_files":{"harness.py":"%s"},"bundle_digest":"%s","measurement_key":"%s","output_dir":"/out/rb%07d","prior_runs":[],"resumed_from":null,"label":null,"case_parameters":%s}',
              'sha256:' || sha256('kernel' || r), 'sha256:' || sha256('harness' || (r % getvariable('keys'))),
              'sha256:' || sha256('bundle' || (r % getvariable('keys'))), 'sha256:' || sha256('key' || (r % getvariable('keys'))), r,
              gen_cases(r % getvariable('keys'))),
       r
FROM range(getvariable('runs')) a(r)
);

INSERT INTO proj_runs
SELECT printf('rb%07d', r), TIMESTAMPTZ '2026-01-01 00:00:00+00' + to_minutes(CAST(r AS BIGINT)), 'bench-host', 'NVIDIA H200',
       'cuda', 'tune', NULL, '/k/kernel.py', 'sha256:' || sha256('kernel' || r), 'sha256:' || sha256('bundle' || (r % getvariable('keys'))),
       'sha256:' || sha256('key' || (r % getvariable('keys'))), printf('/out/rb%07d', r), NULL, '3.6.0', '2.11.0',
       'sm_90', 132, '0.1.0', NULL, NULL, 'k/kernel.py', 'kernel'
FROM range(getvariable('runs')) a(r);

INSERT INTO proj_run_inputs
SELECT printf('rb%07d', r), gen_cases(r % getvariable('keys'))::JSON, []
FROM range(getvariable('runs')) a(r);

INSERT INTO events
SELECT event_id, run_id, seq, ts, type, v, payload, tlx_id_key(event_id), getvariable('runs') + row_number() OVER (ORDER BY run_id, seq) - 1
FROM (
SELECT gen_id(ts, run_id || '/' || seq0) AS event_id, run_id, seq0 AS seq, ts, 'SourceStored' AS type, 1 AS v,
       printf('{"source_hash":"%s","normalized_hash":"%s","text":"%s","size_bytes":%d}', source_hash, normalized_hash,
              printf('def kernel(x, BLOCK=%d, num_warps=%d):  # candidate %s of %s', block, warps, candidate_id, run_id),
              length(printf('def kernel(x, BLOCK=%d, num_warps=%d):  # candidate %s of %s', block, warps, candidate_id, run_id))) AS payload
FROM gen
UNION ALL
SELECT gen_id(ts, run_id || '/' || (seq0 + 1)), run_id, seq0 + 1, ts, 'CandidateProposed', 1,
       printf('{"candidate_id":"%s","parent_id":"baseline","round":%d,"provider":"tune","hypothesis":"BLOCK %d with %d warps moves more bytes per program","evidence":"dram 61%% of peak","change":"BLOCK=%d,num_warps=%d","expected_effect":"+5%%","risk":"register pressure","hypothesis_kind":"launch_config","commit_title":null,"commit_summary":null,"source_hash":"%s","normalized_hash":"%s","knobs":{"BLOCK":%d,"num_warps":%d},"prompt_hash":null,"exchange_id":null,"tokens_in":null,"tokens_out":null,"cost_usd":null,"replays":null}',
              candidate_id, 1 + c // 20, block, warps, block, warps, source_hash, normalized_hash, block, warps)
FROM gen
UNION ALL
SELECT gen_id(ts, run_id || '/' || (seq0 + 2 + k)), run_id, seq0 + 2 + k, ts, 'BenchmarkSampled', 1,
       printf('{"candidate_id":"%s","case_id":"%s","phase":"round","block":0,"samples_us":[%s],"warmup_count":5,"cache_policy":"flush_l2","bytes_moved":268435456,"flops":null}',
              candidate_id, CASE k WHEN 0 THEN 'small' ELSE 'large' END,
              array_to_string([round((100.0 + 900.0 * k) / speedup * (1 + i / 200.0), 3) FOR i IN range(5)], ','))
FROM gen, range(2) cs(k)
UNION ALL
SELECT gen_id(ts, run_id || '/' || (seq0 + 4)), run_id, seq0 + 4, ts, 'DecisionMade', 1,
       printf('{"candidate_id":"%s","outcome":"%s","reason":"speedup %.4f","speedup":%.4f,"ci_low":%.4f,"ci_high":%.4f,"compared_to":"baseline","cases":[]}',
              candidate_id, outcome, speedup, speedup, speedup - 0.01, speedup + 0.01)
FROM gen
UNION ALL
SELECT gen_id(ts, run_id || '/' || (seq0 + 5)), run_id, seq0 + 5, ts,
       CASE WHEN outcome = 'promoted' THEN 'CaseVerified' ELSE 'ExclusionRecorded' END, 1,
       CASE WHEN outcome = 'promoted'
            THEN printf('{"candidate_id":"%s","case_id":"large","passed":true,"phase":"round","attempt":3,"seed":null,"diagnostics":"","metrics":{"max_abs_error":0.0}}', candidate_id)
            ELSE printf('{"candidate_id":"%s","signature":"BLOCK=%d,num_warps=%d","outcome":"%s","reason":"speedup %.4f below 1.01","hypothesis":"BLOCK %d with %d warps"}',
                        candidate_id, block, warps, outcome, speedup, block, warps)
       END
FROM gen
);

-- the final revalidation of every run that promoted: its first promoted candidate, revalidated at
-- 0.99 of its decided speedup, one event after its candidates' (a FinalistRevalidated v2, with its
-- projection row as ingest writes it): what the loop's once-a-run revalidations lookup reads
CREATE TEMPORARY TABLE gen_final AS
SELECT run_id, candidate_id, 1 + getvariable('cands') * 6 AS seq,
       ts + INTERVAL 1 SECOND AS ts, speedup * 0.99 AS speedup
FROM (SELECT *, row_number() OVER (PARTITION BY r ORDER BY c) AS k FROM gen WHERE outcome = 'promoted')
WHERE k = 1
ORDER BY run_id;

SET VARIABLE next_pos = (SELECT count(*) FROM events);

INSERT INTO events
SELECT event_id, run_id, seq, ts, 'FinalistRevalidated', 2,
       printf('{"candidate_id":"%s","survived":true,"reason":"revalidated","speedup":%.4f,"ci_low":%.4f,"ci_high":%.4f,"alternations":10,"cases":[],"notes":[],"replicate_speedups":[]}',
              candidate_id, speedup, speedup - 0.01, speedup + 0.01),
       tlx_id_key(event_id), getvariable('next_pos') + row_number() OVER (ORDER BY run_id) - 1
FROM (SELECT *, gen_id(ts, run_id || '/' || seq) AS event_id FROM gen_final);

INSERT INTO proj_revalidations
SELECT run_id, candidate_id, seq, ts, true, 'revalidated', speedup, speedup - 0.01, speedup + 0.01, 10
FROM gen_final;

INSERT INTO proj_sources
SELECT source_hash, normalized_hash,
       printf('def kernel(x, BLOCK=%d, num_warps=%d):  # candidate %s of %s', block, warps, candidate_id, run_id),
       length(printf('def kernel(x, BLOCK=%d, num_warps=%d):  # candidate %s of %s', block, warps, candidate_id, run_id)),
       tlx_key(source_hash)
FROM gen;

INSERT INTO proj_candidates
SELECT run_id, candidate_id, seq0 + 1, ts, 1 + c // 20, 'baseline', 'tune',
       printf('BLOCK %d with %d warps moves more bytes per program', block, warps), 'launch_config',
       source_hash, normalized_hash, mk, printf('{"BLOCK":%d,"num_warps":%d}', block, warps),
       tlx_key(run_id || '/' || candidate_id), tlx_key(mk), tlx_key(source_hash), tlx_key(normalized_hash),
       printf('BLOCK=%d,num_warps=%d', block, warps), 'dram 61% of peak', '+5%', 'register pressure', NULL, NULL, NULL, NULL
FROM gen;

INSERT INTO proj_decisions
SELECT run_id, candidate_id, seq0 + 4, ts, outcome, printf('speedup %.4f', speedup), speedup, speedup - 0.01, speedup + 0.01, 'baseline',
       tlx_key(run_id || '/' || candidate_id), 1 + c // 20, ts, printf('BLOCK %d with %d warps moves more bytes per program', block, warps),
       printf('{"BLOCK":%d,"num_warps":%d}', block, warps), source_hash, normalized_hash, mk,
       tlx_key(source_hash), tlx_key(normalized_hash), tlx_key(mk), true,
       NULL, NULL, NULL  -- instance_df, instance_sigma, instance_pairs: decided before DecisionMade v3
FROM gen;

INSERT INTO proj_exclusions
SELECT run_id, candidate_id, seq0 + 5, printf('BLOCK=%d,num_warps=%d', block, warps), outcome,
       printf('speedup %.4f below 1.01', speedup), printf('BLOCK %d with %d warps', block, warps), bundle, 'NVIDIA H200',
       tlx_key(bundle)
FROM gen WHERE outcome <> 'promoted';

INSERT INTO proj_samples
SELECT run_id, candidate_id, CASE k WHEN 0 THEN 'small' ELSE 'large' END, 'round', 0, CAST(i AS INTEGER),
       round((100.0 + 900.0 * k) / speedup * (1 + i / 200.0), 3), seq0 + 2 + k, NULL, 1  -- window_id: measured alone; instance: the first build
FROM gen, range(2) cs(k), range(5) sm(i)
ORDER BY r, c, k, i;

INSERT INTO run_heads
SELECT printf('rb%07d', r), coalesce(f.seq + 1, 1 + getvariable('cands') * 6),
       coalesce(f.ts, TIMESTAMPTZ '2026-01-01 00:00:00+00' + to_minutes(CAST(r AS BIGINT)) + to_milliseconds(CAST(getvariable('cands') - 1 AS BIGINT)))
FROM range(getvariable('runs')) a(r)
LEFT JOIN gen_final f ON f.run_id = printf('rb%07d', r);

UPDATE projection_state SET next_pos = (SELECT count(*) FROM events), projected_pos = (SELECT count(*) FROM events);
