"""Parallel evaluation throughput on the CPU: one round of 8 candidates, serially and with
`--devices all` over N simulated devices (TLXDB_SIMULATED_DEVICES), with a harness whose benchmark
sleeps a fixed time (tests/fixtures/sleep_bundle: real builds and verifications of the vecadd
kernel on the Triton interpreter, then the sleep, then samples fixed by BLOCK_SIZE).

Both runs go through the real library API (optimizer.run.lifecycle.optimize) with the same
scripted proposals (tests/support/scripted_provider.py). The round's time is read from the run's
own events: from the first candidate's proposal to the round's last decision (the serial run
evaluates and decides one candidate at a time in between; the parallel run proposes the round,
evaluates it on every device at once and decides in proposal order). The whole run's wall time
(validation, the other devices' baselines, the round, the final revalidation) is reported too.
What a candidate costs here is a fresh harness child (Python importing torch and triton: CPU
work the simulated devices share) plus the sleep; the figures measure the loop's concurrency on
this machine, not a GPU.

usage: python benchmarks/parallel_eval.py [--devices 4] [--sleep-s 10] [--out PATH.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from support.drive_run import ROUND8, parallel_request  # noqa: E402
from support.scripted_provider import ScriptedProvider  # noqa: E402

from optimizer.run import lifecycle  # noqa: E402
from tlxstore.events import CandidateProposed, DecisionMade, DeviceEvaluated, Envelope  # noqa: E402
from tlxstore.runlog import read_envelopes  # noqa: E402


def _round(envs: list[Envelope]) -> dict:
    first = next(e for e in envs if isinstance(e.event, CandidateProposed) and e.event.round == 1)
    decisions = [e for e in envs if isinstance(e.event, DecisionMade)]
    evals = [e.event for e in envs if isinstance(e.event, DeviceEvaluated)]
    return {
        "round_s": (decisions[-1].recorded_at - first.recorded_at).total_seconds(),
        "candidates": len(decisions),
        "decisions": [[d.event.candidate_id, d.event.outcome.value] for d in decisions],
        "evaluations": [
            {
                "candidate_id": e.candidate_id,
                "device": e.device,
                "simulated": e.simulated,
                "started_at": e.started_at.isoformat(),
                "finished_at": e.finished_at.isoformat(),
            }
            for e in evals
        ],
    }


def one_run(devices: str | None, n: int, sleep_s: float) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="parallel-eval-"))
    os.environ["SLEEP_HARNESS_S"] = str(sleep_s)
    os.environ["TLXDB_SIMULATED_DEVICES"] = str(n)
    try:
        t0 = time.monotonic()
        result = lifecycle.optimize(
            parallel_request(tmp, devices), provider=ScriptedProvider(list(ROUND8))
        )
        wall = time.monotonic() - t0
        out = _round(read_envelopes(tmp / "out"))
        return {"devices": devices, "run_wall_s": wall, "winner": result.winner_id, **out}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", type=int, default=4, help="simulated devices (default 4)")
    ap.add_argument("--sleep-s", type=float, default=10.0, help="the benchmark's sleep (s)")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks/results/parallel_eval.json")
    args = ap.parse_args()
    started = datetime.now(UTC).isoformat(timespec="seconds")
    load_before = os.getloadavg()
    serial = one_run(None, args.devices, args.sleep_s)
    parallel = one_run("all", args.devices, args.sleep_s)
    ratio = parallel["round_s"] / serial["round_s"]
    report = {
        "benchmark": "parallel_eval",
        "started_at": started,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "load_avg_before": load_before,
            "load_avg_after": os.getloadavg(),
        },
        "sleep_s": args.sleep_s,
        "simulated_devices": args.devices,
        "serial": serial,
        "parallel": parallel,
        "round_ratio": ratio,
        "target_ratio": 0.3,
        "met": ratio <= 0.3,
        "same_decisions": serial["decisions"] == parallel["decisions"],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(
        f"round of {serial['candidates']}: serial {serial['round_s']:.1f} s, "
        f"{args.devices} simulated devices {parallel['round_s']:.1f} s = {ratio:.3f}x "
        f"(target <= 0.3); whole runs {serial['run_wall_s']:.1f} s / {parallel['run_wall_s']:.1f} s; "
        f"same decisions: {report['same_decisions']}"
    )


if __name__ == "__main__":
    main()
