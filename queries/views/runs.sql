-- One row per run in the store: how it started (kernel identity, device, tools, provider), how it
-- finished (NULL while unfinished), its winner (source hash, decided and revalidated speedup)
-- and its token and cost totals. status: 'finished' (a RunFinished event) or 'unfinished' (none:
-- cut off, or still running; last_event_at tells when it was last heard of).
WITH started AS (
    SELECT run_id, from_json(payload, '{"device": {"architecture": "VARCHAR", "num_sms": "INTEGER"},
        "tool_versions": {"tlxdb": "VARCHAR", "cuda": "VARCHAR"}, "resumed_from": "VARCHAR"}') AS p
    FROM events WHERE type = 'RunStarted'
),
finished AS (
    SELECT run_id, recorded_at, from_json(payload, '{"stopping_reason": "VARCHAR", "success": "BOOLEAN",
        "winner_id": "VARCHAR", "speedup": "DOUBLE", "detail": "VARCHAR"}') AS p
    FROM events WHERE type = 'RunFinished'
    QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY seq DESC) = 1
),
revalidated AS (
    SELECT run_id, payload ->> 'candidate_id' AS candidate_id, CAST(payload ->> 'ci_low' AS DOUBLE) AS ci_low,
        CAST(payload ->> 'ci_high' AS DOUBLE) AS ci_high
    FROM events WHERE type = 'FinalistRevalidated'
    QUALIFY row_number() OVER (PARTITION BY run_id, payload ->> 'candidate_id' ORDER BY seq DESC) = 1
),
exchanges AS (
    SELECT run_id, count(*) AS exchanges, sum(CAST(payload ->> 'tokens_in' AS BIGINT)) AS tokens_in,
        sum(CAST(payload ->> 'tokens_out' AS BIGINT)) AS tokens_out, sum(CAST(payload ->> 'cost_usd' AS DOUBLE)) AS cost_usd
    FROM events WHERE type = 'ModelExchanged'
    GROUP BY run_id
),
counts AS (SELECT run_id, count(*) AS n FROM proj_candidates GROUP BY run_id),
last_seen AS (SELECT run_id, max(recorded_at) AS last_event_at FROM events GROUP BY run_id)
SELECT
    h.run_id,
    CASE WHEN f.run_id IS NULL THEN 'unfinished' ELSE 'finished' END AS status,
    r.started_at,
    f.recorded_at AS finished_at,
    l.last_event_at,
    f.p.stopping_reason AS stopping_reason,
    f.p.success AS success,
    f.p.winner_id AS winner_id,
    w.source_hash AS winner_source_hash,
    wd.speedup AS winner_decided_speedup,
    f.p.speedup AS revalidated_speedup,
    rv.ci_low AS revalidated_ci_low,
    rv.ci_high AS revalidated_ci_high,
    f.p.detail AS detail,
    coalesce(n.n, 0) AS candidates,
    h.next_seq AS events,
    i.entry_point,
    i.kernel_file,
    i.kernel_id,
    r.kernel_path,
    r.bundle_digest,
    r.host,
    r.device_kind,
    r.backend,
    s.p.device.architecture AS architecture,
    s.p.device.num_sms AS num_sms,
    r.provider,
    r.model,
    x.exchanges,
    x.tokens_in,
    x.tokens_out,
    x.cost_usd,
    r.label,
    s.p.tool_versions.tlxdb AS tlxdb_version,
    r.triton_version,
    r.torch_version,
    s.p.tool_versions.cuda AS cuda_version,
    s.p.resumed_from AS resumed_from,
    r.measurement_key,
    r.output_dir
FROM run_heads h
LEFT JOIN proj_runs r ON r.run_id = h.run_id
LEFT JOIN run_identity i ON i.run_id = h.run_id
LEFT JOIN started s ON s.run_id = h.run_id
LEFT JOIN finished f ON f.run_id = h.run_id
LEFT JOIN proj_candidates w ON w.run_id = h.run_id AND w.candidate_id = f.p.winner_id
LEFT JOIN (
    SELECT run_id, candidate_id, speedup FROM proj_decisions
    QUALIFY row_number() OVER (PARTITION BY run_id, candidate_id ORDER BY seq DESC) = 1
) wd ON wd.run_id = h.run_id AND wd.candidate_id = f.p.winner_id
LEFT JOIN revalidated rv ON rv.run_id = h.run_id AND rv.candidate_id = f.p.winner_id
LEFT JOIN exchanges x ON x.run_id = h.run_id
LEFT JOIN counts n ON n.run_id = h.run_id
LEFT JOIN last_seen l ON l.run_id = h.run_id
