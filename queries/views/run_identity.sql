-- The kernel identity of every run: its entry point (the first @triton.jit function of the
-- baseline source), its normalized path (the kernel file and the folder holding it, so
-- /work/main/examples/softmax/kernel.py and /tmp/x/softmax/kernel.py are both softmax/kernel.py),
-- the bundle digest and the device. kernel_id = entry_point @ kernel_file.
SELECT
    r.run_id,
    coalesce(
        nullif(regexp_extract(s.text, '@triton\.jit[^\n]*\n(?:[ \t]*@[^\n]*\n)*[ \t]*def[ \t]+([A-Za-z_][A-Za-z0-9_]*)', 1), ''),
        regexp_extract(r.kernel_path, '([^/\\]+)\.py$', 1)
    ) AS entry_point,
    regexp_extract(r.kernel_path, '([^/\\]+[/\\][^/\\]+|[^/\\]+)$', 1) AS kernel_file,
    coalesce(
        nullif(regexp_extract(s.text, '@triton\.jit[^\n]*\n(?:[ \t]*@[^\n]*\n)*[ \t]*def[ \t]+([A-Za-z_][A-Za-z0-9_]*)', 1), ''),
        regexp_extract(r.kernel_path, '([^/\\]+)\.py$', 1)
    ) || ' @ ' || regexp_extract(r.kernel_path, '([^/\\]+[/\\][^/\\]+|[^/\\]+)$', 1) AS kernel_id,
    r.kernel_path,
    r.bundle_digest,
    r.device_kind,
    r.measurement_key
FROM proj_runs r
LEFT JOIN proj_candidates b ON b.run_id = r.run_id AND b.candidate_id = 'baseline'
LEFT JOIN proj_sources s ON s.source_key = b.source_key AND s.source_hash = b.source_hash
