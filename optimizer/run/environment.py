"""The environment of a run (RunEnvironment): read as it starts and as it resumes.

It is read in a child process with the harness child's environment (tlxdb's without its secrets,
the target's, the device pin of a parallel run), so the CPU affinity recorded is the one the
harness inherits and the GPU is the one it measures on: `python -m profilers.nvml` prints it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import profilers
from optimizer.bundle.device import ProbeError, probe
from tlxstore.config import settings
from tlxstore.events import RunEnvironment
from tlxstore.redaction import without_secrets

REPOSITORY = str(Path(profilers.__file__).resolve().parents[1])
INTERPRETER = "NVML is unavailable on this target: the Triton interpreter runs kernels on the CPU"
NOT_NVIDIA = "NVML is unavailable on this target: NVML reads NVIDIA GPUs, this target is {}"


def read_environment(backend: str, python: str, env: Mapping[str, str]) -> RunEnvironment:
    """The environment a harness child with `env` on top of tlxdb's would measure in, for a
    target of `backend`. Never raises: what cannot be read is None, and `unavailable` says why
    NVML could not be read."""
    args = []
    trace = settings().nvml_trace
    if trace is not None:
        args = ["--trace", str(trace)]
    elif backend == "cpu":
        args = ["--unavailable", INTERPRETER]
    elif backend != "cuda":
        args = ["--unavailable", NOT_NVIDIA.format(backend)]
    child = {**without_secrets(os.environ), **env}
    child["PYTHONPATH"] = os.pathsep.join(p for p in (REPOSITORY, child.get("PYTHONPATH")) if p)
    code = f"import sys; from profilers.nvml import main; sys.exit(main({args!r}))"
    try:
        return RunEnvironment.model_validate(probe(python, code, child))
    except ProbeError as e:
        return RunEnvironment(unavailable=f"the environment could not be read: {e}")
