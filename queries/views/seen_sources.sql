-- Every source hash ever proposed, across runs, per measurement identity: where it was first
-- seen and whether it was ever measured (a decision that recorded it measured, or a baseline
-- benchmarked in validation, which no decision follows).
WITH benchmarked AS (SELECT DISTINCT run_id, candidate_id FROM proj_samples)
SELECT
    c.source_hash,
    any_value(c.normalized_hash) AS normalized_hash,
    c.measurement_key,
    count(*) AS proposals,
    count(DISTINCT c.run_id) AS runs,
    arg_min(c.run_id, c.proposed_at) AS first_run_id,
    arg_min(c.candidate_id, c.proposed_at) AS first_candidate_id,
    min(c.proposed_at) AS first_seen_at,
    bool_or(coalesce(d.measured, false) OR (c.round = 0 AND b.run_id IS NOT NULL)) AS measured,
    any_value(s.size_bytes) AS size_bytes
FROM proj_candidates c
LEFT JOIN proj_decisions d ON d.cand_key = c.cand_key AND d.run_id = c.run_id AND d.candidate_id = c.candidate_id
LEFT JOIN benchmarked b ON b.run_id = c.run_id AND b.candidate_id = c.candidate_id
LEFT JOIN proj_sources s ON s.source_hash = c.source_hash
GROUP BY c.source_hash, c.measurement_key
