-- Hypotheses that should not be tried again, with the kernel, bundle and device kind they failed
-- on: a signature means something only within its bundle (BLOCK=2048 refused for softmax says
-- nothing about RMSNorm).
SELECT
    x.run_id,
    x.candidate_id,
    x.signature,
    x.outcome,
    x.reason,
    x.hypothesis,
    i.kernel_id,
    i.bundle_digest,
    i.device_kind,
    x.seq AS event_seq
FROM proj_exclusions x
LEFT JOIN run_identity i ON i.run_id = x.run_id
