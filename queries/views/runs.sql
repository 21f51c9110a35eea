-- One row per run in the store: how it started (kernel identity, device, tools, provider), how it
-- finished (NULL while unfinished), its winner (source hash, decided and revalidated speedup)
-- and its token and cost totals. status: 'finished' (a RunFinished event) or 'unfinished' (none:
-- cut off, or still running; last_event_at tells when it was last heard of).
WITH finished AS (
    SELECT * FROM proj_finishes
    QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY seq DESC) = 1
),
revalidated AS (
    SELECT run_id, candidate_id, ci_low, ci_high FROM proj_revalidations
    QUALIFY row_number() OVER (PARTITION BY run_id, candidate_id ORDER BY seq DESC) = 1
),
exchanges AS (
    SELECT run_id, count(*) AS exchanges, sum(tokens_in) AS tokens_in, sum(tokens_out) AS tokens_out,
        sum(cost_usd) AS cost_usd
    FROM proj_exchanges
    GROUP BY run_id
)
SELECT
    h.run_id,
    CASE WHEN f.run_id IS NULL THEN 'unfinished' ELSE 'finished' END AS status,
    r.started_at,
    f.finished_at,
    h.last_event_at,
    f.stopping_reason AS stopping_reason,
    f.success AS success,
    f.winner_id AS winner_id,
    w.source_hash AS winner_source_hash,
    wd.speedup AS winner_decided_speedup,
    f.speedup AS revalidated_speedup,
    rv.ci_low AS revalidated_ci_low,
    rv.ci_high AS revalidated_ci_high,
    f.detail AS detail,
    coalesce(n.candidates, 0) AS candidates,
    h.next_seq AS events,
    i.entry_point,
    i.kernel_file,
    i.kernel_id,
    r.kernel_path,
    i.bundle_digest,
    r.host,
    r.device_kind,
    r.backend,
    r.architecture,
    r.num_sms,
    r.provider,
    r.model,
    x.exchanges,
    x.tokens_in,
    x.tokens_out,
    x.cost_usd,
    r.label,
    r.tlxdb_version,
    r.triton_version,
    r.torch_version,
    r.cuda_version,
    r.resumed_from,
    r.measurement_key,
    r.output_dir
FROM run_heads h
LEFT JOIN proj_runs r ON r.run_id = h.run_id
LEFT JOIN run_identity i ON i.run_id = h.run_id
LEFT JOIN finished f ON f.run_id = h.run_id
-- what is read from the big tables (candidates, decisions) is joined laterally: for the runs a
-- filter on the view keeps, not for every run; the candidate count is kept per run
LEFT JOIN LATERAL (
    SELECT source_hash FROM proj_candidates WHERE run_id = h.run_id AND candidate_id = f.winner_id
) w ON true
LEFT JOIN LATERAL (
    SELECT speedup FROM proj_decisions WHERE run_id = h.run_id AND candidate_id = f.winner_id
    ORDER BY seq DESC LIMIT 1
) wd ON true
LEFT JOIN revalidated rv ON rv.run_id = h.run_id AND rv.candidate_id = f.winner_id
LEFT JOIN exchanges x ON x.run_id = h.run_id
LEFT JOIN proj_run_candidates n ON n.run_id = h.run_id
