-- One row per proposed candidate, with its kernel identity, what it tried (hypothesis, kind,
-- change, evidence, expected effect, risk), what it cost to propose (tokens, USD) and its (last)
-- decision; outcome NULL while undecided. decided_speedup is the decision's weighted speedup
-- against the baseline in its round (runs.revalidated_speedup is the winner's final figure).
SELECT
    c.run_id,
    c.candidate_id,
    c.round,
    c.parent_id,
    c.provider,
    c.hypothesis,
    c.hypothesis_kind,
    c.change,
    c.evidence,
    c.expected_effect,
    c.risk,
    c.source_hash,
    c.normalized_hash,
    c.measurement_key,
    c.knobs,
    c.tokens_in,
    c.tokens_out,
    c.cost_usd,
    c.remeasures,
    c.proposed_at,
    d.outcome,
    d.reason,
    d.speedup AS decided_speedup,
    d.ci_low,
    d.ci_high,
    d.compared_to,
    d.decided_at,
    i.entry_point,
    i.kernel_file,
    i.kernel_id,
    i.bundle_digest,
    i.device_kind
FROM proj_candidates c
LEFT JOIN (
    SELECT * FROM proj_decisions
    QUALIFY row_number() OVER (PARTITION BY run_id, candidate_id ORDER BY seq DESC) = 1
) d ON d.cand_key = c.cand_key AND d.run_id = c.run_id AND d.candidate_id = c.candidate_id
LEFT JOIN run_identity i ON i.run_id = c.run_id
