-- One row per run in the store, with how it started and how it finished (NULL while running).
SELECT
    h.run_id,
    r.started_at,
    f.recorded_at AS finished_at,
    f.payload ->> 'stopping_reason' AS stopping_reason,
    CAST(f.payload ->> 'success' AS BOOLEAN) AS success,
    f.payload ->> 'winner_id' AS winner_id,
    CAST(f.payload ->> 'speedup' AS DOUBLE) AS speedup,
    (SELECT count(*) FROM proj_candidates c WHERE c.run_id = h.run_id) AS candidates,
    h.next_seq AS events,
    r.host,
    r.device_kind,
    r.provider,
    r.model,
    r.kernel_path,
    r.label,
    r.triton_version,
    r.torch_version,
    r.bundle_digest,
    r.measurement_key,
    r.output_dir
FROM run_heads h
LEFT JOIN proj_runs r ON r.run_id = h.run_id
LEFT JOIN (SELECT * FROM events WHERE type = 'RunFinished') f ON f.run_id = h.run_id
