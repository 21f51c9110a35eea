"""Short real `tlxdb optimize` runs of the softmax example's host bundle on the interpreter (the
CLI, a real store): a two-round budget by default and one-row cases keep each run to seconds,
most of them validation's."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from cli.main import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "softmax"
BUDGET = {
    "max_rounds": 2,
    "candidates_per_round": 1,
    "max_candidate_seconds": 120,
    "max_total_seconds": 600,
    "min_speedup": 1.05,
    "max_cv": 1.0,
    "benchmark_repetitions": 3,
}


def optimize(bundle: Path, store: Path, out: Path, *flags: str) -> dict:
    """One run of the example's kernel on `bundle` (with more `flags`); its result (run_id,
    winner_id, ...)."""
    done = CliRunner().invoke(
        main,
        [
            "optimize",
            "--kernel",
            str(EXAMPLE / "kernel.py"),
            "--bundle",
            str(bundle),
            "--store",
            str(store),
            "--output-dir",
            str(out),
            "--no-commit-winner",
            *flags,
        ],
    )
    assert done.exit_code in (0, 2), done.output[-3000:]
    return json.loads(done.stdout)
