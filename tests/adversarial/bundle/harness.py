"""A TLX-style harness for a Triton vector add (the bundle the adversarial corpus attacks).

build() imports the kernel source as a module and returns its `add` entry point. verify() draws
inputs, computes the expected result with torch first, runs the kernel and compares with
torch.allclose. benchmark() times repeated calls with time.perf_counter.

Inputs come from torch's global RNG; with HARNESS_FIXED_INPUTS=1 in the target environment they
come from a private generator with a fixed seed instead, as many hand-written harnesses do (every
call sees the same inputs). That is what lets several cheats pass the harness alone.
"""

import importlib.util
import os
import tempfile
import time

import torch

_loaded = [0]


def build(kernel_source, target):
    _loaded[0] += 1
    folder = tempfile.mkdtemp(prefix="tlx-kernel-")
    path = os.path.join(folder, "kernel.py")
    with open(path, "w") as f:
        f.write(kernel_source)
    spec = importlib.util.spec_from_file_location(f"tlx_kernel_{_loaded[0]}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.add


def _inputs(case):
    n = int(case["parameters"]["n"])
    if os.environ.get("HARNESS_FIXED_INPUTS") == "1":
        g = torch.Generator().manual_seed(1234)
        return torch.randn(n, generator=g), torch.randn(n, generator=g)
    return torch.randn(n), torch.randn(n)


def verify(add, case):
    x, y = _inputs(case)
    expected = x + y
    out = add(x, y)
    if not isinstance(out, torch.Tensor) or out.shape != expected.shape:
        return {
            "passed": False,
            "diagnostics": f"output is {type(out).__name__} {getattr(out, 'shape', '')}",
        }
    err = (out - expected).abs().max().item()
    passed = torch.allclose(out, expected, rtol=1e-5, atol=1e-6)
    return {
        "passed": bool(passed),
        "diagnostics": f"max_abs_error={err:.3g}",
        "metrics": {"max_abs_error": err},
    }


def benchmark(add, case, repetitions):
    x, y = _inputs(case)
    for _ in range(2):
        add(x, y)
    samples = []
    for _ in range(repetitions):
        t0 = time.perf_counter()
        add(x, y)
        samples.append((time.perf_counter() - t0) * 1e6)
    return {"samples_us": samples, "warmup_count": 2, "cache_policy": "none"}
