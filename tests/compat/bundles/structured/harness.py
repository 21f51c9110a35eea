"""A harness in the TLX agent's newer shape: the artifact is a dict holding a TemporaryDirectory
and the module (a dict without "success" is an artifact, not a build result), verify returns a
plain bool, benchmark returns {"samples_us": ...}, and profile takes the structured request.

profile checks the request as the TLX agent sends it and fails loudly if it is not so: every key,
an absolute, existing artifacts_dir of this experiment and case. It writes a raw trace there, and
returns nulls with a diagnostic (no GPU profiler here) plus a payload over 1 MB, which tlxdb must
spill to a file rather than carry inline."""

import importlib.util
import json
import os
import tempfile
import time
import uuid

import torch

REQUEST_KEYS = {"level", "tools", "experiment_id", "artifacts_dir", "reason", "diagnostic_only"}


def build(kernel_source, target):
    workdir = tempfile.TemporaryDirectory(prefix="compat-structured-")
    path = os.path.join(workdir.name, "kernel.py")
    with open(path, "w") as f:
        f.write(kernel_source)
    spec = importlib.util.spec_from_file_location(f"vecadd_{uuid.uuid4().hex}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {"module": module, "workdir": workdir}


def _inputs(case):
    n = case["parameters"]["n"]
    return torch.randn(n), torch.randn(n)


def verify(artifact, case):
    x, y = _inputs(case)
    return bool(torch.allclose(artifact["module"].add(x, y), x + y))


def benchmark(artifact, case, repetitions):
    x, y = _inputs(case)
    add = artifact["module"].add
    add(x, y)
    samples = []
    for _ in range(repetitions):
        t0 = time.perf_counter()
        add(x, y)
        samples.append((time.perf_counter() - t0) * 1e6)
    return {"samples_us": samples, "warmup_count": 1}


def profile(artifact, case, request):
    missing = REQUEST_KEYS - set(request)
    if missing:
        raise ValueError(f"the profile request lacks {sorted(missing)}")
    folder = request["artifacts_dir"]
    if not (os.path.isabs(folder) and os.path.isdir(folder)):
        raise ValueError(f"artifacts_dir {folder!r} is not an existing absolute folder")
    if case["case_id"] not in folder or request["experiment_id"] not in folder:
        raise ValueError(f"artifacts_dir {folder!r} is not per experiment and case")
    trace = os.path.join(folder, "trace.json")
    with open(trace, "w") as f:
        json.dump({"case": case["case_id"], "level": request["level"]}, f)
    return {
        "proton": None,
        "ncu": None,
        "note": "no GPU profiler on this host",
        "trace_path": trace,
        "events": ["x" * 100] * 11_000,
    }
