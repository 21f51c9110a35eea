"""The examples' tests share one tune run of the host softmax example."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support.scripts import script


@pytest.fixture(scope="session")
def softmax_tune_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """benchmarks/hopper_tune.py on the host softmax example, once: its `tlxdb optimize
    --provider tune` run of examples/softmax/host (a child process, the bundle's budget, no
    commit) writes OUT/softmax/, the store OUT/store.duckdb and the full result JSON
    OUT/softmax_result.json. test_benchmark_scripts reads the script's report;
    test_tune_on_softmax takes the run as its first tune run (the same command it would run)."""
    out = tmp_path_factory.mktemp("hopper_tune")
    done = script(
        "hopper_tune.py",
        "--out",
        str(out),
        "--target",
        "host",
        "--examples",
        "softmax",
        interpret=False,
    )
    return done, out
