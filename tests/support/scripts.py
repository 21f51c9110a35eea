"""The scripts of benchmarks/ run as a user runs them: a child process of this Python."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def script(name: str, *args: str, interpret: bool = True) -> subprocess.CompletedProcess:
    """The script `name` of the benchmarks folder with `args`; `interpret` sets TRITON_INTERPRET=1
    (else it is unset)."""
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    return subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / name), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
