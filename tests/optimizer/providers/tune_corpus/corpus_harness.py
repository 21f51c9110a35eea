"""The host harness every corpus bundle uses: one operation per style, on the Triton interpreter.

A bundle's harness.py is three lines: it names its operation and takes build/verify/benchmark
from `make(op)`. Timings are wall-clock microseconds of the interpreter (best of 3 calls per
sample), not of a GPU. Inputs are small: the corpus is about where knobs are written, and each
tune run must take seconds.
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


def _rmsnorm(x, w):
    return (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6) * w).to(x.dtype)


# op -> (entry function, inputs from the case parameters, reference)
OPS = {
    "add": ("add", lambda p: (torch.randn(p["n"]), torch.randn(p["n"])), lambda x, y: x + y),
    "scale": ("scale", lambda p: (torch.randn(p["n"]),), lambda x: x * 2.0),
    "softmax": (
        "softmax",
        lambda p: (torch.randn(p["n_rows"], p["n_cols"]),),
        lambda x: torch.softmax(x, -1),
    ),
    "rmsnorm": (
        "rmsnorm",
        lambda p: (torch.randn(p["n_rows"], p["n_cols"]), torch.randn(p["n_cols"])),
        _rmsnorm,
    ),
    "matmul": (
        "matmul",
        lambda p: (torch.randn(p["M"], p["K"]), torch.randn(p["K"], p["N"])),
        lambda a, b: a @ b,
    ),
}


def load_kernel(source):
    path = Path(tempfile.mkdtemp(prefix="tlxdb-corpus-")) / "kernel.py"
    path.write_text(source)
    name = f"tlxdb_corpus_{uuid.uuid4().hex}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def make(op):
    entry, inputs, reference = OPS[op]

    def build(kernel_source, target):
        try:
            fn = getattr(load_kernel(kernel_source), entry)
        except Exception as e:  # any failure to import is a failed build
            return {"success": False, "artifact": None, "diagnostics": f"{type(e).__name__}: {e}"}
        return {"success": True, "artifact": fn, "diagnostics": ""}

    def verify(artifact, case):
        args = inputs(case["parameters"])
        out = artifact(*args)
        ref = reference(*args)
        if not isinstance(out, torch.Tensor) or out.shape != ref.shape:
            return {"passed": False, "diagnostics": "output has the wrong type or shape"}
        err = float((out.float() - ref.float()).abs().max())
        passed = bool(torch.allclose(out.float(), ref.float(), atol=1e-3, rtol=1e-3))
        return {"passed": passed, "diagnostics": "" if passed else f"max abs error {err:.3g}"}

    def benchmark(artifact, case, repetitions):
        args = inputs(case["parameters"])
        artifact(*args)  # warm-up
        samples = []
        for _ in range(repetitions):
            best = math.inf
            for _ in range(CALLS_PER_SAMPLE):
                start = time.perf_counter()
                artifact(*args)
                best = min(best, time.perf_counter() - start)
            samples.append(best * 1e6)
        return {
            "samples_us": samples,
            "warmup_count": 1,
            "cache_policy": "cpu-interpreter wall clock",
        }

    return build, verify, benchmark
