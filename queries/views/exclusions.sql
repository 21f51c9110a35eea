-- Hypotheses that should not be tried again, with the bundle and device kind they failed on.
SELECT run_id, candidate_id, signature, outcome, reason, hypothesis, bundle_digest, device_kind, seq AS event_seq
FROM proj_exclusions
