-- Every decision with the candidate's hypothesis. measured: the decision rests on a full
-- measurement of the source (as the loop recorded it); notes: what qualified it (a case noisier
-- than max_cv, decided on its interval); instance_df, instance_sigma, instance_pairs: what its
-- interval carried of how far instances of one source run apart (the run's estimate and its
-- degrees of freedom, 0: none yet; each pair of instances' speedup a second window measured;
-- NULL in decisions recorded before DecisionMade v3).
SELECT
    d.run_id,
    d.candidate_id,
    d.outcome,
    d.reason,
    d.speedup AS decided_speedup,
    d.ci_low,
    d.ci_high,
    d.compared_to,
    d.measured,
    coalesce(n.notes, []) AS notes,
    d.instance_df,
    d.instance_sigma,
    d.instance_pairs,
    d.decided_at,
    c.hypothesis,
    c.round
FROM proj_decisions d
LEFT JOIN proj_candidates c ON c.cand_key = d.cand_key AND c.run_id = d.run_id AND c.candidate_id = d.candidate_id
LEFT JOIN (
    SELECT run_id, event_seq, list(note ORDER BY note_index) AS notes FROM proj_notes WHERE stage = 'decision'
    GROUP BY run_id, event_seq
) n ON n.run_id = d.run_id AND n.event_seq = d.seq
