"""Make the CPU runs of the history test store (tests/support/history_store.py): real
`tlxdb optimize` runs of the host softmax and RMSNorm examples on the Triton interpreter, one
store, in this order:

1. softmax, tune, 3 rounds
2. softmax, tune, 3 rounds (the first run is in the store: it learns from it)
3. rmsnorm, 2 rounds, a command agent that sets BLOCK = 1024 (2048 when its parent has 1024)
   and says hypothesis_kind "block_size"
4. rmsnorm, the same agent again: its first candidate is a duplicate of run 3's
5. rmsnorm, tune, 2 rounds

Their output folders are copied to tests/fixtures/history/cpu_<n>_<kernel>/ (events.jsonl and
the result). Timings measure the interpreter on a CPU, not a GPU.

    TRITON_INTERPRET=1 python tests/support/make_history_runs.py
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "tests" / "fixtures" / "history"
BUDGET = {
    "candidates_per_round": 1,
    "max_candidate_seconds": 120,
    "max_total_seconds": 600,
    "min_speedup": 1.05,
    "max_cv": 1.0,
    "benchmark_repetitions": 5,
}
AGENT = """import json, re
block = 2048 if re.search(r"^BLOCK = 1024", open("candidate.py").read(), re.M) else 1024
src = open("original.py").read()
open("candidate.py", "w").write(re.sub(r"^BLOCK = \\d+", f"BLOCK = {block}", src, flags=re.M))
json.dump({"hypothesis": f"BLOCK {block} cuts the loop iterations of a 4096-column row",
           "change": f"BLOCK = {block}", "hypothesis_kind": "block_size"},
          open("candidate_metadata.json", "w"))
"""


def bundle(tmp: Path, kernel: str, rounds: int) -> Path:
    """The example's host bundle with a small budget (one bundle, one digest, per kernel)."""
    dest = tmp / kernel
    if not dest.exists():
        shutil.copytree(REPO / "examples" / kernel / "host", dest)
        (dest / "budget.json").write_text(json.dumps({"max_rounds": rounds, **BUDGET}))
    return dest


def optimize(tmp: Path, n: int, kernel: str, rounds: int, *provider: str) -> None:
    out = tmp / f"out{n}"
    done = subprocess.run(
        [
            str(Path(sys.executable).with_name("tlxdb")), "optimize",
            "--kernel", str(REPO / "examples" / kernel / "kernel.py"),
            "--bundle", str(bundle(tmp, kernel, rounds)),
            "--store", str(tmp / "store.duckdb"),
            "--output-dir", str(out),
            "--no-commit-winner", "--result-format", "summary", *provider,
        ],
        cwd=REPO, capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode not in (0, 2):
        raise SystemExit(f"run {n} failed ({done.returncode}): {done.stderr[-2000:]}")
    dest = OUT / f"cpu_{n}_{kernel}"
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    shutil.copy(out / "events.jsonl", dest / "events.jsonl")
    print(n, kernel, done.stdout.strip()[-300:])


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        agent = tmp / "agent.py"
        agent.write_text(AGENT)
        command = ["--provider", "command", "--provider-command", f"{sys.executable} {agent}"]
        optimize(tmp, 1, "softmax", 3)
        optimize(tmp, 2, "softmax", 3)
        optimize(tmp, 3, "rmsnorm", 2, *command)
        optimize(tmp, 4, "rmsnorm", 2, *command)
        optimize(tmp, 5, "rmsnorm", 2)


if __name__ == "__main__":
    main()
