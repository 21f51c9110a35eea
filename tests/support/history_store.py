"""The history test store: several runs of two kernels (softmax, RMSNorm) on two devices (the
CPU interpreter, an H200), plus a cut-off and a finished matmul run on the H200, all brought in
with `tlxdb import` from real run logs: the CPU runs of tests/fixtures/history (made by
make_history_runs.py) and the H200 runs committed as tlxdb exports under benchmarks/results/."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from cli.main import main

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks" / "results"
H200_LOGS = (
    RESULTS / "h200_tune_final_2026-11-30" / "softmax",
    RESULTS / "h200_tune_final_2026-11-30" / "rmsnorm",
    RESULTS / "h200_tune_2026-11-30" / "run3_matmul_events",  # cut off: no RunFinished
    RESULTS / "h200_matmul_2026-11-30" / "tune_run" / "matmul",
)
CPU_LOGS = tuple(sorted((REPO / "tests" / "fixtures" / "history").glob("cpu_*")))

H200_SOFTMAX = "r20261130-161908-5afb48"
H200_RMSNORM = "r20261130-162138-0eff1f"
H200_MATMUL_CUT_OFF = "r20261130-135544-e20b0f"
H200_MATMUL = "r20261130-161040-6ef777"
CPU_SOFTMAX = ("r20261201-180134-35942b", "r20261201-180325-6f966a")
CPU_RMSNORM_AGENT = ("r20261201-180520-dc3e9f", "r20261201-180643-de68a0")
CPU_RMSNORM_TUNE = "r20261201-180712-350ecf"


def build(store: Path) -> Path:
    """Import every log into `store` through the CLI, as a user would."""
    done = CliRunner().invoke(
        main, ["import", *map(str, (*CPU_LOGS, *H200_LOGS)), "--store", str(store)]
    )
    assert done.exit_code == 0, done.output
    return store
