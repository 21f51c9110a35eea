"""Tiled-matmul bundle, host target: the Triton interpreter on the CPU.

Timings are wall-clock microseconds of the interpreter, not of a GPU. Each sample is the fastest
of CALLS_PER_SAMPLE back-to-back calls: on a shared CPU the minimum is the call least disturbed by
other processes, and the interpreter's work itself does not vary. Inputs are fresh random
tensors on every call (torch's global generator, which tlxdb seeds freshly per call).
"""

import importlib.util
import math
import sys
import tempfile
import time
import uuid
from pathlib import Path

import torch

CALLS_PER_SAMPLE = 3
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
    dtype = getattr(torch, p.get("dtype", "float32"))
    return torch.randn(p["M"], p["K"]).to(dtype), torch.randn(p["K"], p["N"]).to(dtype)


def build(kernel_source, target):
    try:
        fn = getattr(_load(kernel_source), ENTRY)
        c = fn(torch.randn(40, 24), torch.randn(24, 56))  # a launch error fails the build
        if tuple(c.shape) != (40, 56):
            raise ValueError(f"{ENTRY} returned shape {tuple(c.shape)} for (40x24)@(24x56)")
    except Exception as e:  # any failure to import or launch is a failed build
        return {"success": False, "artifact": None, "diagnostics": f"{type(e).__name__}: {e}"}
    return {"success": True, "artifact": fn, "diagnostics": ""}


def verify(artifact, case):
    a, b = _inputs(case)
    a_before, b_before = a.clone(), b.clone()
    c = artifact(a, b)
    if not isinstance(c, torch.Tensor) or tuple(c.shape) != (a.shape[0], b.shape[1]):
        return {"passed": False, "diagnostics": "output has the wrong type or shape"}
    if not (torch.equal(a, a_before) and torch.equal(b, b_before)):
        return {"passed": False, "diagnostics": "the kernel wrote into its inputs"}
    ref = a.double() @ b.double()
    err = (c.double() - ref).abs()
    max_abs = float(err.max())
    max_rel = float((err / ref.abs().clamp_min(1e-6)).max())
    atol, rtol = 1e-4 * math.sqrt(a.shape[1]), 1e-4
    passed = bool(torch.isfinite(c).all()) and bool((err <= atol + rtol * ref.abs()).all())
    diagnostics = "" if passed else f"max abs error {max_abs:.3g}, max rel error {max_rel:.3g}"
    return {"passed": passed, "diagnostics": diagnostics,
            "metrics": {"max_abs_error": max_abs, "max_rel_error": max_rel}}


def benchmark(artifact, case, repetitions):
    a, b = _inputs(case)
    artifact(a, b)  # warm-up: the first call pays the interpreter's one-time costs
    samples = []
    for _ in range(repetitions):
        best = math.inf
        for _ in range(CALLS_PER_SAMPLE):
            start = time.perf_counter()
            artifact(a, b)
            best = min(best, time.perf_counter() - start)
        samples.append(best * 1e6)
    M, K = a.shape
    N = b.shape[1]
    return {
        "samples_us": samples,
        "warmup_count": 1,
        "cache_policy": f"cpu-interpreter wall clock, best of {CALLS_PER_SAMPLE} calls per sample",
        "bytes_moved": (M * K + K * N + M * N) * a.element_size(),
        "flops": 2 * M * N * K,
    }
