"""A host harness in the shape the TLX agent ships: the artifact is a tuple holding a
TemporaryDirectory and the kernel module, `build_experiment` exists beside `build`, verify returns
a dict without metrics, the timing is synthetic (constant samples derived from BLOCK_SIZE) and
profile is the legacy two-argument form returning end-to-end numbers, no kernel attribution."""

import importlib.util
import os
import tempfile
import uuid

import torch


def build(kernel_source, target):
    workdir = tempfile.TemporaryDirectory(prefix="compat-host-")
    path = os.path.join(workdir.name, "kernel.py")
    with open(path, "w") as f:
        f.write(kernel_source)
    spec = importlib.util.spec_from_file_location(f"host_add_{uuid.uuid4().hex}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return (workdir, module)


def build_experiment(kernel_source, target, experiment):
    """Non-promotable experiments (TLX's ablations); tlxdb proposes only promotable ones."""
    return build(kernel_source, target)


def verify(artifact, case):
    _, module = artifact
    n = case["parameters"]["n"]
    x, y = torch.randn(n), torch.randn(n)
    ok = torch.allclose(module.vector_add(x, y), x + y)
    return {"passed": bool(ok), "diagnostics": "allclose" if ok else "mismatch"}


def benchmark(artifact, case, repetitions):
    _, module = artifact
    return [100.0 * 64 / module.BLOCK_SIZE] * repetitions


def profile(artifact, case):
    _, module = artifact
    return {"latency_ms": 0.1 * 64 / module.BLOCK_SIZE, "tflops": None}
