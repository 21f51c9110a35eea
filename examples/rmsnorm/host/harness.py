"""RMSNorm bundle, host target: the Triton interpreter on the CPU.

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
ENTRY = "rmsnorm"
EPS = 1e-6


def _load(kernel_source):
    path = Path(tempfile.mkdtemp(prefix="tlxdb-rmsnorm-")) / "kernel.py"
    path.write_text(kernel_source)
    name = f"tlxdb_rmsnorm_{uuid.uuid4().hex}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _inputs(case):
    p = case["parameters"]
    dtype = getattr(torch, p.get("dtype", "float32"))
    x = (torch.randn(p["n_rows"], p["n_cols"]) * 3 + 0.5).to(dtype)
    w = (torch.rand(p["n_cols"]) + 0.5).to(dtype)
    return x, w


def _reference(x, w):
    xf = x.float()
    return xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + EPS) * w.float()


def build(kernel_source, target):
    try:
        fn = getattr(_load(kernel_source), ENTRY)
        y = fn(torch.randn(3, 70), torch.ones(70), EPS)  # a launch error fails the build
        if tuple(y.shape) != (3, 70):
            raise ValueError(f"{ENTRY} returned shape {tuple(y.shape)} for a (3, 70) input")
    except Exception as e:  # any failure to import or launch is a failed build
        return {"success": False, "artifact": None, "diagnostics": f"{type(e).__name__}: {e}"}
    return {"success": True, "artifact": fn, "diagnostics": ""}


def verify(artifact, case):
    x, w = _inputs(case)
    x_before, w_before = x.clone(), w.clone()
    y = artifact(x, w, EPS)
    if not isinstance(y, torch.Tensor) or y.shape != x.shape or y.dtype != x.dtype:
        return {"passed": False, "diagnostics": "output has the wrong type, shape or dtype"}
    if y.data_ptr() == x.data_ptr() or not (torch.equal(x, x_before) and torch.equal(w, w_before)):
        return {"passed": False, "diagnostics": "the kernel wrote into its inputs"}
    ref = _reference(x, w)
    err = (y.float() - ref).abs()
    max_abs = float(err.max())
    max_rel = float((err / ref.abs().clamp_min(1e-6)).max())
    atol, rtol = (1e-5, 1e-4) if x.dtype == torch.float32 else (1e-5, 1.6e-2)
    passed = bool(torch.isfinite(y).all()) and bool((err <= atol + rtol * ref.abs()).all())
    diagnostics = "" if passed else f"max abs error {max_abs:.3g}, max rel error {max_rel:.3g}"
    return {"passed": passed, "diagnostics": diagnostics,
            "metrics": {"max_abs_error": max_abs, "max_rel_error": max_rel}}


def benchmark(artifact, case, repetitions):
    x, w = _inputs(case)
    artifact(x, w, EPS)  # warm-up: the first call pays the interpreter's one-time costs
    samples = []
    for _ in range(repetitions):
        best = math.inf
        for _ in range(CALLS_PER_SAMPLE):
            start = time.perf_counter()
            artifact(x, w, EPS)
            best = min(best, time.perf_counter() - start)
        samples.append(best * 1e6)
    return {
        "samples_us": samples,
        "warmup_count": 1,
        "cache_policy": f"cpu-interpreter wall clock, best of {CALLS_PER_SAMPLE} calls per sample",
        "bytes_moved": (2 * x.numel() + w.numel()) * x.element_size(),
    }
