"""Short real `tlxdb optimize` runs of the softmax example's host bundle on the interpreter (the
CLI, a real store): a two-round budget by default and one-row cases keep each run to seconds,
most of them validation's; and a run's candidates as the store lists them."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

import queries
from cli.main import main
from tlxstore.store import Store

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


def run_candidates(store: Path, run_id: str) -> list[dict]:
    """A run's candidates as the store's `candidates` view lists them (the baseline left out),
    in order: candidate_id, knobs (a dict), evidence, remeasures, outcome."""
    rows = queries.query(
        Store(store),
        "SELECT candidate_id, knobs, evidence, remeasures, outcome FROM candidates "
        "WHERE run_id = $r AND candidate_id <> 'baseline' ORDER BY candidate_id",
        {"r": run_id},
    ).to_pylist()
    return [{**r, "knobs": json.loads(r["knobs"]) if r["knobs"] else {}} for r in rows]
