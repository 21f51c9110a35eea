"""Row-softmax bundle, hopper target: CUDA on an H100/H200.

Each sample is the median of triton.testing.do_bench (L2 flushed before every launch), in
microseconds. Inputs are fresh random tensors on every call. bytes_moved is the minimum traffic:
the input read once and the output written once.
"""

import importlib.util
import sys
import tempfile
import uuid
from pathlib import Path

import torch
import triton

ENTRY = "softmax"


def _load(kernel_source):
    path = Path(tempfile.mkdtemp(prefix="tlxdb-softmax-")) / "kernel.py"
    path.write_text(kernel_source)
    name = f"tlxdb_softmax_{uuid.uuid4().hex}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _inputs(case):
    p = case["parameters"]
    dtype = getattr(torch, p.get("dtype", "bfloat16"))
    return (torch.randn(p["n_rows"], p["n_cols"], device="cuda") * 4).to(dtype)


def build(kernel_source, target):
    try:
        fn = getattr(_load(kernel_source), ENTRY)
        for shape in ((2, 5), (3, 700)):  # short and long rows: compiles and launches
            y = fn(torch.randn(*shape, device="cuda", dtype=torch.bfloat16))
            torch.cuda.synchronize()
            if tuple(y.shape) != shape:
                raise ValueError(f"{ENTRY} returned shape {tuple(y.shape)} for a {shape} input")
    except Exception as e:  # any failure to import, compile or launch is a failed build
        return {"success": False, "artifact": None, "diagnostics": f"{type(e).__name__}: {e}"}
    return {"success": True, "artifact": fn, "diagnostics": ""}


def verify(artifact, case):
    x = _inputs(case)
    x_before = x.clone()
    y = artifact(x)
    torch.cuda.synchronize()
    if not isinstance(y, torch.Tensor) or y.shape != x.shape or y.dtype != x.dtype:
        return {"passed": False, "diagnostics": "output has the wrong type, shape or dtype"}
    if y.data_ptr() == x.data_ptr() or not torch.equal(x, x_before):
        return {"passed": False, "diagnostics": "the kernel wrote into its input"}
    ref = torch.softmax(x.float(), dim=-1)
    err = (y.float() - ref).abs()
    max_abs = float(err.max())
    max_rel = float((err / ref.abs().clamp_min(1e-12)).max())
    atol, rtol = (1e-6, 1e-4) if x.dtype == torch.float32 else (1e-5, 1.6e-2)
    passed = bool(torch.isfinite(y).all()) and bool((err <= atol + rtol * ref.abs()).all())
    diagnostics = "" if passed else f"max abs error {max_abs:.3g}, max rel error {max_rel:.3g}"
    return {"passed": passed, "diagnostics": diagnostics,
            "metrics": {"max_abs_error": max_abs, "max_rel_error": max_rel}}


def benchmark(artifact, case, repetitions):
    x = _inputs(case)
    samples = [
        triton.testing.do_bench(lambda: artifact(x), return_mode="median") * 1e3
        for _ in range(repetitions)
    ]
    return {
        "samples_us": samples,
        "warmup_count": 1,
        "cache_policy": "l2_flush",
        "bytes_moved": 2 * x.numel() * x.element_size(),
    }
