-- Work per case as the harness declared it (bytes moved, floating-point operations) beside the
-- measured median, per run, candidate, case and phase: achieved GB/s and TFLOP/s (NULL where the
-- harness declared nothing). The roofline's points. A declared number its column cannot hold (a
-- harness's bytes_moved of 2**70) reads as NULL (TRY_CAST; the event keeps it as it was given):
-- it never fails the view.
WITH work AS (
    SELECT run_id, payload ->> 'candidate_id' AS candidate_id, payload ->> 'case_id' AS case_id,
        coalesce(payload ->> 'phase', 'round') AS phase,
        max(TRY_CAST(payload ->> 'bytes_moved' AS BIGINT)) AS bytes_moved, max(TRY_CAST(payload ->> 'flops' AS BIGINT)) AS flops
    FROM events WHERE type = 'BenchmarkSampled'
    GROUP BY ALL
)
SELECT
    r.run_id,
    r.candidate_id,
    r.case_id,
    r.phase,
    r.median_us,
    w.bytes_moved,
    w.flops,
    w.bytes_moved / (r.median_us * 1e3) AS gbytes_per_s,
    w.flops / (r.median_us * 1e6) AS tflops_per_s,
    w.flops / nullif(w.bytes_moved, 0) AS flops_per_byte
FROM case_results r
JOIN work w ON w.run_id = r.run_id AND w.candidate_id = r.candidate_id AND w.case_id = r.case_id AND w.phase = r.phase
