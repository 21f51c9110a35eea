"""Scale-and-shift bundle, hopper target: CUDA on an H100/H200.

Each sample is one `triton.testing.do_bench(lambda: scale_shift(x, a, b))` in microseconds, as
people write it: its default return mode (the mean of its repetitions, the L2 flushed before
each), the autotuner's wrapper included in what is timed. On the small case the launch and the
wrapper take about as long as the kernel, so its samples are noisy (bimodal on an H200). Inputs
(x, a, b) are fresh random values on every call. bytes_moved is the minimum traffic: x read once
and y written once.
"""

import importlib.util
import sys
import tempfile
import uuid
from pathlib import Path

import torch
import triton

ENTRY = "scale_shift"


def _load(kernel_source):
    path = Path(tempfile.mkdtemp(prefix="tlxdb-scale-shift-")) / "kernel.py"
    path.write_text(kernel_source)
    name = f"tlxdb_scale_shift_{uuid.uuid4().hex}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _inputs(case):
    p = case["parameters"]
    dtype = getattr(torch, p.get("dtype", "float32"))
    x = (torch.randn(p["n"], device="cuda") * 4).to(dtype)
    a = float(torch.empty(()).uniform_(0.5, 2.0))
    b = float(torch.randn(()))
    return x, a, b


def _check(y, x, x_before, a, b):
    """(passed, diagnostics, metrics) of an output against x * a + b in float64."""
    if not isinstance(y, torch.Tensor) or y.shape != x.shape or y.dtype != x.dtype:
        return False, "output has the wrong type, shape or dtype", {}
    if y.data_ptr() == x.data_ptr() or not torch.equal(x, x_before):
        return False, "the kernel wrote into its input", {}
    ref = x.double() * a + b
    err = (y.double() - ref).abs()
    max_abs = float(err.max()) if err.numel() else 0.0
    atol, rtol = (1e-5, 1e-5) if x.dtype == torch.float32 else (1e-2, 1.6e-2)
    passed = bool(torch.isfinite(y).all()) and bool((err <= atol + rtol * ref.abs()).all())
    return passed, "" if passed else f"max abs error {max_abs:.3g}", {"max_abs_error": max_abs}


def build(kernel_source, target):
    try:
        fn = getattr(_load(kernel_source), ENTRY)
        for n, dtype in ((5, torch.float32), (1000, torch.bfloat16)):  # compiles and launches
            y = fn(torch.randn(n, device="cuda").to(dtype), 2.0, 1.0)
            torch.cuda.synchronize()
            if tuple(y.shape) != (n,):
                raise ValueError(f"{ENTRY} returned shape {tuple(y.shape)} for {n} elements")
    except Exception as e:  # any failure to import, compile or launch is a failed build
        return {"success": False, "artifact": None, "diagnostics": f"{type(e).__name__}: {e}"}
    return {"success": True, "artifact": fn, "diagnostics": ""}


def verify(artifact, case):
    x, a, b = _inputs(case)
    x_before = x.clone()
    y = artifact(x, a, b)
    torch.cuda.synchronize()
    passed, diagnostics, metrics = _check(y, x, x_before, a, b)
    return {"passed": passed, "diagnostics": diagnostics, "metrics": metrics}


def benchmark(artifact, case, repetitions):
    x, a, b = _inputs(case)
    samples = [
        triton.testing.do_bench(lambda: artifact(x, a, b)) * 1e3 for _ in range(repetitions)
    ]
    return {
        "samples_us": samples,
        "warmup_count": 1,
        "cache_policy": "l2_flush",
        "bytes_moved": 2 * x.numel() * x.element_size(),
    }
