"""Tiled-matmul bundle, hopper target: CUDA on an H100/H200.

Each sample is the median of triton.testing.do_bench (L2 flushed before every launch), in
microseconds. Inputs are fresh random tensors on every call. flops = 2·M·N·K; bytes_moved is
the minimum traffic (A and B read once, C written once).
"""

import importlib.util
import math
import sys
import tempfile
import uuid
from pathlib import Path

import torch
import triton

ENTRY = "matmul"


def _load(kernel_source):
    path = Path(tempfile.mkdtemp(prefix="tlxdb-matmul-")) / "kernel.py"
    path.write_text(kernel_source)
    name = f"tlxdb_matmul_{uuid.uuid4().hex}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _inputs(case):
    p = case["parameters"]
    dtype = getattr(torch, p.get("dtype", "bfloat16"))
    a = torch.randn(p["M"], p["K"], device="cuda").to(dtype)
    b = torch.randn(p["K"], p["N"], device="cuda").to(dtype)
    return a, b


def build(kernel_source, target):
    try:
        fn = getattr(_load(kernel_source), ENTRY)
        a = torch.randn(40, 24, device="cuda", dtype=torch.bfloat16)
        c = fn(a, torch.randn(24, 56, device="cuda", dtype=torch.bfloat16))  # compiles, launches
        torch.cuda.synchronize()
        if tuple(c.shape) != (40, 56):
            raise ValueError(f"{ENTRY} returned shape {tuple(c.shape)} for (40x24)@(24x56)")
    except Exception as e:  # any failure to import, compile or launch is a failed build
        return {"success": False, "artifact": None, "diagnostics": f"{type(e).__name__}: {e}"}
    return {"success": True, "artifact": fn, "diagnostics": ""}


def verify(artifact, case):
    a, b = _inputs(case)
    a_before, b_before = a.clone(), b.clone()
    c = artifact(a, b)
    torch.cuda.synchronize()
    if not isinstance(c, torch.Tensor) or tuple(c.shape) != (a.shape[0], b.shape[1]):
        return {"passed": False, "diagnostics": "output has the wrong type or shape"}
    if not (torch.equal(a, a_before) and torch.equal(b, b_before)):
        return {"passed": False, "diagnostics": "the kernel wrote into its inputs"}
    ref = a.float() @ b.float()
    err = (c.float() - ref).abs()
    max_abs = float(err.max())
    max_rel = float((err / ref.abs().clamp_min(1e-3)).max())
    atol, rtol = 2e-3 * math.sqrt(a.shape[1]), 1.6e-2  # bf16 output rounding, fp32 accumulation
    passed = bool(torch.isfinite(c).all()) and bool((err <= atol + rtol * ref.abs()).all())
    diagnostics = "" if passed else f"max abs error {max_abs:.3g}, max rel error {max_rel:.3g}"
    return {"passed": passed, "diagnostics": diagnostics,
            "metrics": {"max_abs_error": max_abs, "max_rel_error": max_rel}}


def benchmark(artifact, case, repetitions):
    a, b = _inputs(case)
    samples = [
        triton.testing.do_bench(lambda: artifact(a, b), return_mode="median") * 1e3
        for _ in range(repetitions)
    ]
    M, K = a.shape
    N = b.shape[1]
    return {
        "samples_us": samples,
        "warmup_count": 1,
        "cache_policy": "l2_flush",
        "bytes_moved": (M * K + K * N + M * N) * a.element_size(),
        "flops": 2 * M * N * K,
    }
