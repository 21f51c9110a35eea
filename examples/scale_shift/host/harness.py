"""Scale-and-shift bundle, host target: the Triton interpreter on the CPU, tiny sizes.

Timings are wall-clock microseconds of the interpreter, not of a GPU: each sample is the fastest
of CALLS_PER_SAMPLE back-to-back calls. Inputs (x, a, b) are fresh random values on every call
(from torch's global generator, which tlxdb seeds freshly per call).

`@triton.autotune` cannot benchmark its configs under the interpreter: it asks the GPU driver
for a benchmarker, and there is none ("0 active drivers"). This harness gives the autotuners of
its process a CPU timer instead (`_time_on_cpu`, in place of Triton's `Autotuner.do_bench`), so
the kernel runs as written, its autotuner choosing between its configs by their interpreter
times. Nothing in the kernel changes; the hopper harness leaves the autotuner as it is.
"""

import importlib.util
import math
import sys
import tempfile
import time
import uuid
from pathlib import Path

import torch
from triton.runtime.autotuner import Autotuner

CALLS_PER_SAMPLE = 3
ENTRY = "scale_shift"


def _time_on_cpu(kernel_call, quantiles):
    """The autotuner's benchmarker on the interpreter: the fastest of CALLS_PER_SAMPLE calls, in
    milliseconds, for each quantile it asks."""
    best = math.inf
    for _ in range(CALLS_PER_SAMPLE):
        start = time.perf_counter()
        kernel_call()
        best = min(best, time.perf_counter() - start)
    return [best * 1e3 for _ in quantiles]


Autotuner.do_bench = property(lambda self: _time_on_cpu)  # the driver's benchmarker needs a GPU


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
    x = (torch.randn(p["n"]) * 4).to(dtype)
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
        for n, dtype in ((5, torch.float32), (100, torch.bfloat16)):  # a launch error fails it
            y = fn(torch.randn(n).to(dtype), 2.0, 1.0)
            if tuple(y.shape) != (n,):
                raise ValueError(f"{ENTRY} returned shape {tuple(y.shape)} for {n} elements")
    except Exception as e:  # any failure to import or launch is a failed build
        return {"success": False, "artifact": None, "diagnostics": f"{type(e).__name__}: {e}"}
    return {"success": True, "artifact": fn, "diagnostics": ""}


def verify(artifact, case):
    x, a, b = _inputs(case)
    x_before = x.clone()
    passed, diagnostics, metrics = _check(artifact(x, a, b), x, x_before, a, b)
    return {"passed": passed, "diagnostics": diagnostics, "metrics": metrics}


def benchmark(artifact, case, repetitions):
    x, a, b = _inputs(case)
    artifact(x, a, b)  # warm-up: the first call pays the interpreter's one-time costs
    samples = []
    for _ in range(repetitions):
        best = math.inf
        for _ in range(CALLS_PER_SAMPLE):
            start = time.perf_counter()
            artifact(x, a, b)
            best = min(best, time.perf_counter() - start)
        samples.append(best * 1e6)
    return {
        "samples_us": samples,
        "warmup_count": 1,
        "cache_policy": f"cpu-interpreter wall clock, best of {CALLS_PER_SAMPLE} calls per sample",
        "bytes_moved": 2 * x.numel() * x.element_size(),
    }
