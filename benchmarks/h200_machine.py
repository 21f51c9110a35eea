"""The machine as evidence on an H200 (issue 33), in one device call (about 300-480 s), in four
steps (--step; default all in order), each leaving what the next needs under --out, so that
benchmarks/device/h200_machine.sh runs each under its own timeout:

1. record: this process's GPU read through NVML (profilers/nvml.py) while it idles, while a
   matmul loop of its own runs, and while a competing process runs one: a trace in the form the
   CPU tests replay (tests/fixtures/machine/nvml_trace.json), laid out in that fixture's order
   of calls (quiet, power cap, hardware slowdown, quiet, shared, quiet...), a recorded call
   wherever the device showed that kind, the fixture's constructed one where it did not (a
   hardware slowdown is rare on a quiet card, and nothing here changes the card's settings).
2. quiet: `tlxdb optimize` of the untuned softmax kernel on a bundle with a small case (one row
   of 1024: do_bench times the launch, a host-bound case) and a large one, the tune provider,
   one round of two candidates, three replicates; ncu left out (PATH without it: its profiles
   are not what this run shows, and cost minutes).
3. shared: the same, `--provider remeasure --remeasure-run QUIET` (the quiet run's candidates, in
   order), and from c001's proposal to the run's end a competing process (a bf16 matmul loop)
   on the GPU in bursts (--competitor-seconds each, one every BURST_PERIOD_S): the calls beside
   a burst are marked and measured again, and the decisions should be the quiet run's.
4. summary: both runs exported (`tlxdb export`), and summary.json / summary.md: per run the benchmark
   calls and their machine states (every call has one?), the marked calls, the blocks measured
   again, the decisions, the host-bound notes, the replicates, the environment; whether the two
   runs decided alike; and machine_states.jsonl, the states recorded (the other fixture of
   tests/fixtures/machine).

Usage (on the device, from the repository root, after benchmarks/device/env.sh):
    python3 benchmarks/h200_machine.py --out /tmp/machine
`--target host` runs the same code on the CPU (the softmax example's host bundle on the Triton
interpreter, no recording, a competitor that only sleeps): with TLXDB_NVML_TRACE set, the
machine's state comes from that trace (`MACHINE_TARGET=host bash
benchmarks/device/h200_machine.sh` runs it so).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from optimizer.decision.machine import DEGRADING_REASONS  # noqa: E402
from profilers import nvml  # noqa: E402

FIXTURES = REPO / "tests" / "fixtures" / "machine"
EXAMPLE = REPO / "examples" / "softmax"
CASES = {
    "hopper": [
        {"case_id": "1x1024", "parameters": {"n_rows": 1, "n_cols": 1024, "dtype": "bfloat16"}},
        {
            "case_id": "8192x8192",
            "parameters": {"n_rows": 8192, "n_cols": 8192, "dtype": "bfloat16"},
        },
    ],
    "host": [
        {"case_id": "2x4096", "parameters": {"n_rows": 2, "n_cols": 4096, "dtype": "float32"}}
    ],
}
COMPETITOR = """
import sys, time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
(a @ a).sum().item()  # the context is up and the GPU busy from here
print("busy", flush=True)
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    for _ in range(8):
        a @ a
    torch.cuda.synchronize()
"""
SLEEPER = 'import sys, time; print("busy", flush=True); time.sleep(float(sys.argv[1]))'
LONGEST_COMPETITOR_S = 120.0  # a competitor stopped by the script is never left running longer
BURST_PERIOD_S = 8.0  # a competing burst begins every this many seconds (_compete)
TLXDB = [sys.executable, "-c", "import sys; from cli.main import main; sys.exit(main())"]
FIXTURE_ORDER = ["quiet", "capped", "degrading", "quiet", "shared", "quiet", "quiet", "quiet"]


def log(*parts: object) -> None:
    print(*parts, file=sys.stderr, flush=True)


def competitor(seconds: float, target: str = "hopper") -> subprocess.Popen[str]:
    """A process of its own, busy on the GPU for `seconds` once its context is up (on the host
    target it only sleeps: there is no GPU to share)."""
    code = COMPETITOR if target == "hopper" else SLEEPER
    p = subprocess.Popen(
        [sys.executable, "-c", code, str(seconds)], stdout=subprocess.PIPE, text=True
    )
    assert p.stdout is not None
    p.stdout.readline()  # "busy"
    return p


def kind(reasons: set[str], shared: bool) -> str:
    """quiet, capped (the software power cap alone), degrading, shared, or other."""
    reasons = reasons - {"gpu_idle"}
    if shared:
        return "shared"
    if reasons & set(DEGRADING_REASONS):
        return "degrading"
    return "capped" if reasons == {"sw_power_cap"} else "quiet" if not reasons else "other"


def kind_of_reading(r: dict[str, Any]) -> str:
    return kind(set(nvml.reason_names(r.get("reasons") or 0)), len(r.get("processes") or []) > 1)


def kind_of_state(state: dict[str, Any]) -> str:
    return kind({r for r, n in state["reasons"].items() if n}, bool(state["neighbours"]))


def record(out: Path, seconds: float) -> dict[str, Any]:
    """The trace of step 1, written as nvml_trace.json; what kinds of call it recorded."""
    import torch

    device = nvml.open_device(nvml.Selector.from_environment(os.environ))
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()
    stop = threading.Event()

    def own_load() -> None:
        while not stop.is_set():
            for _ in range(8):
                a @ a
            torch.cuda.synchronize()

    idle = nvml.record_trace(device, [("idle", seconds / 3)])
    loader = threading.Thread(target=own_load)
    loader.start()
    busy = nvml.record_trace(device, [("own matmul", seconds / 3)])
    stop.set()
    loader.join()
    other = competitor(seconds / 3 + 1.0)
    shared = nvml.record_trace(device, [("shared", seconds / 3)])
    other.wait()
    calls: dict[str, list[list[dict[str, Any]]]] = {}
    for part in (idle, busy, shared):  # each phase split into calls of 5 readings, by kind
        for readings in part["calls"]:
            for i in range(0, len(readings) - 4, 5):
                chunk = readings[i : i + 5]
                kinds = {kind_of_reading(r) for r in chunk}
                k = next((k for k in ("shared", "degrading", "capped") if k in kinds), "quiet")
                calls.setdefault(k, []).append(chunk)
    constructed = json.loads((FIXTURES / "nvml_trace.json").read_text())
    by_label: dict[str, list[Any]] = {}
    for label, call in zip(constructed["labels"], constructed["calls"], strict=True):
        by_label.setdefault(
            {"power_capped": "capped", "throttled": "degrading"}.get(label, label), []
        ).append(call)
    laid, origins = [], []
    for n, k in enumerate(FIXTURE_ORDER):
        mine = calls.get(k, [])
        if mine:
            laid.append(mine[n % len(mine)])
            origins.append("h200")
        else:
            laid.append(by_label[k][0])
            origins.append("constructed")
    trace = {
        "description": "RECORDED on an H200 by benchmarks/h200_machine.py (a call marked "
        "'constructed' in origins is the constructed fixture's: the device did not show that "
        "kind); readings in pynvml's units, 'self' for the recording process",
        "device": idle["device"],
        "labels": FIXTURE_ORDER,
        "origins": origins,
        "calls": laid,
    }
    (out / "nvml_trace.json").write_text(json.dumps(trace, indent=1) + "\n")
    return {k: len(v) for k, v in calls.items()} | {"origins": origins}


def bundle(folder: Path, target: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("harness.py", "target.json"):
        shutil.copy(EXAMPLE / target / name, folder / name)
    (folder / "cases.json").write_text(json.dumps(CASES[target]))
    return folder


def tlxdb_env() -> dict[str, str]:
    """This environment, with ncu off the PATH (no ncu profiles: not what is shown here)."""
    env = dict(os.environ)
    ncu = shutil.which("ncu")
    if ncu:
        drop = str(Path(ncu).resolve().parent), str(Path(ncu).parent)
        env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if p not in drop)
    return env


def _compete(proc: subprocess.Popen[str], events: Path, burst_s: float, target: str) -> dict:
    """Bursts of a competing process on the GPU from the moment c001 is proposed to the end of
    the run: every BURST_PERIOD_S a new process, busy `burst_s` seconds once its context is up,
    then gone. tlxdb writes a candidate's samples when its window ends, so no event can say when
    a window starts; bursts over the rest of the run put some calls of every window beside a
    neighbour and leave others quiet. When each burst ran, in seconds from the call."""
    t0, seen, bursts = time.monotonic(), 0, []
    started = False
    while proc.poll() is None:
        if not started:
            text = events.read_text() if events.exists() else ""
            for line in text[seen:].splitlines(keepends=True):
                if not line.endswith("\n"):
                    break
                seen += len(line)
                rec = json.loads(line)
                if (
                    rec["type"] == "CandidateProposed"
                    and rec["payload"].get("candidate_id") == "c001"
                ):
                    started = True
            if not started:
                time.sleep(0.02)
                continue
        t_start = time.monotonic()
        other = competitor(min(burst_s, LONGEST_COMPETITOR_S), target)
        busy = time.monotonic() - t0
        other.wait()
        bursts.append({"busy_s": round(busy, 2), "stopped_s": round(time.monotonic() - t0, 2)})
        rest = BURST_PERIOD_S - (time.monotonic() - t_start)
        end = time.monotonic() + max(rest, 0.0)
        while proc.poll() is None and time.monotonic() < end:
            time.sleep(0.05)
    return {"bursts": bursts, "burst_s": burst_s, "period_s": BURST_PERIOD_S}


def optimize(args, label: str, out: Path, *provider: str, compete: bool = False) -> dict:
    """One `tlxdb optimize`; with `compete`, a competing process on the GPU during c001's
    window (_compete)."""
    run_dir = out / label
    cmd = [
        *TLXDB, "optimize",
        "--kernel", str(out / "src" / "kernel.py"), "--bundle", str(out / "bundle"),
        "--store", str(out / "store.duckdb"), "--output-dir", str(run_dir),
        "--max-rounds", "1", "--candidates-per-round", str(args.candidates),
        "--benchmark-repetitions", str(args.repetitions), "--max-candidate-seconds", "120",
        "--replicates", str(args.replicates), "--max-total-seconds", str(args.max_total_seconds),
        "--no-commit-winner", "--label", label,
        *(["--max-cv", str(args.max_cv)] if args.max_cv is not None else []), *provider,
    ]  # fmt: skip
    t0 = time.monotonic()
    proc = subprocess.Popen(
        cmd, env=tlxdb_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    when: dict[str, float] = {}
    if compete:
        events = run_dir / "events.jsonl"
        watcher = threading.Thread(
            target=lambda: when.update(_compete(proc, events, args.competitor_seconds, args.target))
        )
        watcher.start()
    try:
        stdout, stderr = proc.communicate(timeout=args.run_timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
    if compete:
        watcher.join()
    (out / f"{label}.stderr.txt").write_text(stderr)
    log(f"{label}: exit {proc.returncode} in {time.monotonic() - t0:.0f} s")
    result = json.loads(stdout) if stdout.strip().startswith("{") else {}
    return {
        "label": label,
        "exit_code": proc.returncode,
        "wall_s": round(time.monotonic() - t0, 1),
        "run_id": result.get("run_id") or _started_run_id(run_dir),
        "competitor": when,
        "output_dir": str(run_dir),
    }


def _started_run_id(run_dir: Path) -> str | None:
    """The run id a run's log started with (a run stopped by its timeout printed none)."""
    try:
        return next((e.run_id for e in _envelopes(run_dir)), None)
    except Exception:  # noqa: BLE001 - no log, or none readable: no run to name
        return None


def _envelopes(run_dir: Path) -> list[Any]:
    from tlxstore.runlog import read_envelopes

    return list(read_envelopes(run_dir))


def events_of(run_dir: Path) -> list[Any]:
    return [e.event for e in _envelopes(run_dir)]


def summarize_run(run: dict[str, Any]) -> dict[str, Any]:
    from optimizer.decision import machine

    evs = events_of(Path(run["output_dir"]))
    sampled = [e for e in evs if e.type == "BenchmarkSampled"]
    states = [e for e in evs if e.type == "MachineSampled"]
    key = lambda e: (e.candidate_id, e.case_id, e.phase, e.window_id, e.block)  # noqa: E731
    marked = [
        {"window": e.window_id, "phase": e.phase.value, "candidate": e.candidate_id, "case": e.case_id,
         "block": e.block, "why": machine.marks(e)}
        for e in states if machine.marks(e)
    ]  # fmt: skip
    decisions = {
        e.candidate_id: {"outcome": e.outcome, "speedup": e.speedup, "reason": e.reason, "notes": e.notes}
        for e in evs if e.type == "DecisionMade"
    }  # fmt: skip
    revals = [
        {"candidate": e.candidate_id, "survived": e.survived, "speedup": e.speedup,
         "replicates": e.replicate_speedups, "reason": e.reason}
        for e in evs if e.type == "FinalistRevalidated"
    ]  # fmt: skip
    env = next((e.model_dump(mode="json") for e in evs if e.type == "RunEnvironment"), None)
    finished = next((e for e in evs if e.type == "RunFinished"), None)
    return {
        **run,
        "benchmark_calls": len(sampled),
        "machine_states": len(states),
        "every_call_has_a_state": sorted(map(key, sampled)) == sorted(map(key, states)),
        "marked_calls": marked,
        "blocks_measured_again": sum(1 for e in sampled if e.extra),
        "decisions": decisions,
        "host_bound_notes": sorted(
            {n for d in decisions.values() for n in d["notes"] if "host work" in n}
        ),
        "revalidations": revals,
        "winner": finished.winner_id if finished else None,
        "environment": env,
        "states": [(e, run["run_id"]) for e in states],
    }


def fixture_states(runs: list[dict[str, Any]]) -> str:
    """machine_states.jsonl: the first state of each kind the runs recorded, and the fixture's
    constructed states of the kinds they did not show."""
    keep = ("candidate_id", "case_id", "phase", "window_id", "block", "type")
    lines: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        for e, run_id in run["states"]:
            payload = {k: v for k, v in e.model_dump(mode="json").items() if k not in keep}
            lines.setdefault(
                kind_of_state(payload), [{"origin": f"h200 {run_id}", "state": payload}]
            )
    recorded = set(lines)
    for line in (FIXTURES / "machine_states.jsonl").read_text().splitlines():
        item = json.loads(line)
        if kind_of_state(item["state"]) not in recorded:
            lines.setdefault(kind_of_state(item["state"]), []).append(item)
    return "".join(json.dumps(item) + "\n" for items in lines.values() for item in items)


STEPS = ("record", "quiet", "shared", "summary")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--target", choices=sorted(CASES), default="hopper")
    ap.add_argument(
        "--step",
        choices=STEPS,
        action="append",
        help="run only these steps (repeatable; default: all, in order); each leaves what the "
        "next needs under --out, so a device script runs each under its own timeout",
    )
    ap.add_argument("--record-seconds", type=float, default=6.0)
    ap.add_argument(
        "--competitor-seconds",
        type=float,
        default=2.0,
        help="how long each competing burst keeps the GPU busy (one every BURST_PERIOD_S from "
        "c001's proposal to the run's end)",
    )
    ap.add_argument("--max-cv", type=float, help="tlxdb's --max-cv (default: its own)")
    ap.add_argument("--repetitions", type=int, default=4)
    ap.add_argument("--candidates", type=int, default=2, help="candidates of the one round")
    ap.add_argument("--replicates", type=int, default=3)
    ap.add_argument(
        "--max-total-seconds",
        type=float,
        default=150.0,
        help="each run's tlxdb time budget (it stops proposing in time and ends properly)",
    )
    ap.add_argument("--run-timeout", type=float, default=185.0)
    args = ap.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    steps = args.step or list(STEPS)
    if "record" in steps:
        if args.target == "hopper":
            try:
                recorded: Any = record(out, args.record_seconds)
            except Exception as e:  # noqa: BLE001 - the runs still tell what they can
                recorded = f"recording failed: {type(e).__name__}: {e}"
        else:
            recorded = "not recorded: no GPU on the host target"
        log("record:", recorded)
        (out / "record.json").write_text(json.dumps(recorded) + "\n")
    if "quiet" in steps:
        (out / "src").mkdir(exist_ok=True)
        shutil.copy(EXAMPLE / "kernel.py", out / "src" / "kernel.py")
        bundle(out / "bundle", args.target)
        (out / "quiet.json").write_text(json.dumps(optimize(args, "quiet", out)) + "\n")
    if "shared" in steps:
        quiet = _step_result(out, "quiet")
        if quiet and quiet["run_id"]:
            shared = optimize(
                args, "shared", out, "--provider", "remeasure", "--remeasure-run", quiet["run_id"],
                compete=True,
            )  # fmt: skip
            (out / "shared.json").write_text(json.dumps(shared) + "\n")
    if "summary" in steps:
        summarize(out)
    return 0


def _step_result(out: Path, step: str) -> Any:
    """What an earlier step left under --out (None: it did not finish)."""
    path = out / f"{step}.json"
    return json.loads(path.read_text()) if path.exists() else None


def summarize(out: Path) -> None:
    """Export the runs, write machine_states.jsonl, summary.json and summary.md."""
    summary: dict[str, Any] = {"written": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    summary["recorded_calls"] = _step_result(out, "record")
    runs = [summarize_run(r) for r in map(lambda s: _step_result(out, s), ("quiet", "shared")) if r]
    ids = [r["run_id"] for r in runs if r["run_id"]]
    if ids:
        subprocess.run(
            [*TLXDB, "export", *ids, "--store", str(out / "store.duckdb"),
             "--to", str(out / "export")], check=False, env=tlxdb_env(),
        )  # fmt: skip
    (out / "machine_states.jsonl").write_text(fixture_states(runs))
    for r in runs:
        r.pop("states")
    summary["runs"] = runs
    if len(runs) == 2:
        a, b = runs
        summary["decisions_equal"] = {c: d["outcome"] for c, d in a["decisions"].items()} == {
            c: d["outcome"] for c, d in b["decisions"].items()
        } and a["winner"] == b["winner"]
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
    lines = [f"# The machine as evidence ({summary['written']})", ""]
    lines.append(f"recorded calls by kind: {summary.get('recorded_calls')}")
    for r in runs:
        lines += [
            "", f"## {r['label']} run {r['run_id']} (exit {r['exit_code']}, {r['wall_s']} s)",
            f"- benchmark calls {r['benchmark_calls']}, machine states {r['machine_states']}, "
            f"every call has one: {r['every_call_has_a_state']}",
            f"- marked calls {len(r['marked_calls'])}, blocks measured again {r['blocks_measured_again']}",
            f"- competitor: {r['competitor'] or 'none'}",
            "- decisions: " + ", ".join(f"{c} {d['outcome']} {d['speedup']}" for c, d in r["decisions"].items()),
            f"- winner {r['winner']}; revalidations: {r['revalidations']}",
            *[f"- {n}" for n in r["host_bound_notes"]],
            f"- environment: {r['environment']}",
        ]  # fmt: skip
        lines += [f"  - marked: {m}" for m in r["marked_calls"][:12]]
    if "decisions_equal" in summary:
        lines += ["", f"decisions of the two runs equal: {summary['decisions_equal']}"]
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
