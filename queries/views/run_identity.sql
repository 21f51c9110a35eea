-- The kernel identity of every run: its entry point (the first @triton.jit function the baseline
-- source launches, else its first: tlx_kernel_name), its normalized path (the kernel file and the folder holding it, so
-- /work/main/examples/softmax/kernel.py and /tmp/x/softmax/kernel.py are both softmax/kernel.py),
-- the bundle digest and the device. kernel_id = entry_point @ kernel_file. baseline_source_hash: the
-- source the run measured every speedup against (source_estimates pools only under one).
SELECT
    r.run_id,
    coalesce(
        nullif(b.entry_point, ''),
        r.kernel_stem
    ) AS entry_point,
    r.kernel_file AS kernel_file,
    coalesce(
        nullif(b.entry_point, ''),
        r.kernel_stem
    ) || ' @ ' || r.kernel_file AS kernel_id,
    r.kernel_path,
    r.bundle_digest,
    r.device_kind,
    r.measurement_key,
    b.source_hash AS baseline_source_hash
FROM proj_runs r
LEFT JOIN proj_baselines b ON b.run_id = r.run_id
