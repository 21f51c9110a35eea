"""tlxdb's own profiling on each example: its cost per candidate, and what it records in a run.

    python benchmarks/h200_profiling.py --out DIR [--examples softmax,rmsnorm,matmul]
        [--rounds 2] [--repeats 2] [--target hopper|host] [--no-veto]

Per example (the bundles have no harness profile()):
1. Overhead, measured with the evaluator itself on the example's kernel, `--repeats` times: the
   wall time of one candidate's evaluation without profiling (build, 3 verifications per case,
   the benchmark); the same with tlxdb's Proton attribution (one extra benchmark(artifact, case, 1)
   per case); and the ncu summary profile from a child prestarted while that evaluation ran (as
   the run loop does), i.e. the part of the ncu profile on the candidate's critical path. The
   overhead is (attribution + ncu) / evaluation without profiling; the issue's bound is 25%. The
   benchmark samples of the two evaluations are compared (count and median): profiling is not in
   them. A cold ncu child (deep set, the baseline's case) is timed too.
2. One `tlxdb optimize --provider tune --max-rounds R` run into one store, then `tlxdb query`-able
   views dumped: per candidate and case, whether it has attribution, an ncu summary or the deep
   set, and its roofline row.
3. (softmax only, unless --no-veto) the ncu veto: a baseline whose wrapper makes a wasted copy of
   its input and launches the kernel at its best setting, and a candidate without the copy but at
   a worse num_warps: faster end to end, slower in its main kernel. A run with `--provider command`
   proposes it; its decision and the ncu times are recorded.

Everything lands in DIR (overhead.json, the run logs, views.json, veto.json, summary.md).
`--target host` runs the pipeline on the CPU interpreter (Proton and ncu then say they are
unavailable), which is how the script is tested without a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from optimizer.bundle.spec import CaseSpec  # noqa: E402
from optimizer.decision.kernel import Level  # noqa: E402
from optimizer.evaluation.attribution import kernel_functions  # noqa: E402
from optimizer.evaluation.evaluator import Evaluator  # noqa: E402
from optimizer.evaluation.ncu_child import NcuProfiler  # noqa: E402
from optimizer.evaluation.requests import EvalRequest, HarnessBundle  # noqa: E402
from tlxstore.events import BenchmarkSampled, Event, ProfileCollected  # noqa: E402

VIEWS_SQL = {
    "profiles_by_candidate": """
        SELECT run_id, candidate_id, case_id,
               max(CASE WHEN source = 'proton' AND metric = 'main_kernel_time_us' THEN value END)
                   AS proton_main_us,
               max(CASE WHEN source = 'ncu' AND metric = 'gpu__time_duration.sum' THEN value END)
                   AS ncu_duration_us,
               count(*) FILTER (WHERE source = 'ncu' AND metric LIKE 'smsp__average_warps_issue_stalled%')
                   AS deep_stall_metrics,
               count(*) FILTER (WHERE source = 'ncu' AND metric LIKE 'smsp__average_warps_issue_stalled%'
                                AND value IS NULL) AS deep_stall_nulls,
               max(CASE WHEN source = 'ncu' AND metric = 'profiling_wall_ms' THEN value END)
                   AS ncu_range_ms,
               max(CASE WHEN source = 'ncu' AND metric = 'ncu_child_wall_ms' THEN value END)
                   AS ncu_child_ms,
               max(CASE WHEN source = 'proton' AND metric = 'profiling_wall_ms' THEN value END)
                   AS proton_ms
        FROM profiles GROUP BY ALL ORDER BY run_id, candidate_id, case_id""",
    "rooflines": """
        SELECT run_id, candidate_id, case_id, time_us, time_source, bytes_source, flops_source,
               bandwidth_fraction, compute_fraction, bound, benchmark_median_us, proton_main_us,
               ncu_main_us, disagreement
        FROM rooflines ORDER BY run_id, candidate_id, case_id""",
    "decisions": "SELECT * FROM decisions ORDER BY run_id, candidate_id",
}


def bundle_of(example: str, target: str) -> HarnessBundle:
    root = REPO / "examples" / example / target
    raw_target = json.loads((root / "target.json").read_text())
    cases = [CaseSpec(**c) for c in json.loads((root / "cases.json").read_text())]
    env = {str(k): str(v) for k, v in (raw_target.get("environment") or {}).items()}
    return HarnessBundle(root=root, cases=cases, target=raw_target, environment=env)


def timed_evaluation(
    ev: Evaluator, source: str, cid: str, profile: bool, ncu: NcuProfiler | None = None
) -> tuple[float, list[Event]]:
    """One evaluation's wall time; with `ncu`, as the run loop does it: the prestarted ncu child
    gets the source at the start and is waited for before the benchmark."""
    events: list[Event] = []
    t0 = time.perf_counter()
    if ncu is not None:
        ncu.begin(source)
    ev.evaluate(
        EvalRequest(
            candidate_id=cid, source=source, repetitions=10, timeout_s=600.0, profile=profile
        ),
        events.append,
        before_benchmark=None if ncu is None else ncu.settle,
    )
    return time.perf_counter() - t0, events


def samples(events: list[Event]) -> dict[str, list[float]]:
    return {e.case_id: e.samples_us for e in events if isinstance(e, BenchmarkSampled)}


def main_kernel(events: list[Event], source: str) -> str | None:
    for e in events:
        if isinstance(e, ProfileCollected) and e.kernel_names and e.metrics[0].source == "proton":
            return e.kernel_names[0]
    own = kernel_functions(source)
    return own[0] if own else None


def overhead(example: str, target: str, repeats: int, cold_child: bool = True) -> dict[str, Any]:
    """Stage 1 (see the module doc)."""
    bundle = bundle_of(example, target)
    source = (REPO / "examples" / example / "kernel.py").read_text()
    ev = Evaluator(bundle)
    ncu = NcuProfiler(ev)
    rows = []
    kernel = None
    cold: dict[str, Any] = {}
    try:
        for i in range(repeats):
            plain_s, plain_events = timed_evaluation(ev, source, f"plain{i}", profile=False)
            if i == 0:
                kernel = kernel_functions(source)[0]
                if not cold_child and ncu.unavailable() is None:
                    ncu.prestart(kernel)  # as the loop does after the previous candidate
                elif ncu.unavailable() is None:
                    # a cold child with the deep set: what the baseline pays; profile() then
                    # prestarts the summary child that the next candidate uses, as in a run
                    t0 = time.perf_counter()
                    r = ncu.profile("cold", source, bundle.cases[:1], kernel, Level.DEEP, 600)
                    cold = {
                        "seconds": time.perf_counter() - t0,
                        "profiled": [e.metrics[0].value is not None for e in r.events],
                        "diagnostics": r.diagnostics,
                        "events": [e.model_dump(mode="json") for e in r.events],
                    }
            attr_s, attr_events = timed_evaluation(ev, source, f"attr{i}", profile=True, ncu=ncu)
            seen = main_kernel(attr_events, source)
            ncu_s = None
            ncu_ok = False
            summary_events = []
            if seen is not None and ncu.unavailable() is None:
                t0 = time.perf_counter()
                r = ncu.profile(f"summary{i}", source, bundle.cases, seen, Level.SUMMARY, 600)
                ncu_s = time.perf_counter() - t0
                ncu_ok = all(e.metrics[0].value is not None for e in r.events) and bool(r.events)
                summary_events = [e.model_dump(mode="json") for e in r.events]
            proton_s = sum(
                (m.value or 0.0) / 1e3
                for e in attr_events
                if isinstance(e, ProfileCollected)
                for m in e.metrics
                if m.source == "proton" and m.name == "profiling_wall_ms"
            )
            a, b = samples(plain_events), samples(attr_events)
            rows.append(
                {
                    "plain_s": plain_s,
                    "with_attribution_s": attr_s,
                    "proton_calls_s": proton_s,
                    "ncu_summary_s": ncu_s,
                    "ncu_summary_profiled_every_case": ncu_ok,
                    "overhead_fraction": (
                        (max(attr_s - plain_s, proton_s) + (ncu_s or 0.0)) / plain_s
                    ),
                    "samples_per_case": {k: [len(a.get(k, [])), len(b.get(k, []))] for k in a},
                    "median_us_plain_vs_profiled": {
                        k: [statistics.median(a[k]), statistics.median(b.get(k) or [0.0])]
                        for k in a
                    },
                    "attribution": [
                        e.model_dump(mode="json")
                        for e in attr_events
                        if isinstance(e, ProfileCollected)
                    ],
                    "ncu_summary": summary_events,
                }
            )
    finally:
        ncu.close()
    return {"example": example, "main_kernel": kernel, "cold_deep": cold, "repeats": rows}


def tlxdb(*args: str, capture: bool = True) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p
        ),
    }
    argv = [sys.executable, "-c", "import sys; from cli.main import main; sys.exit(main())"]
    return subprocess.run([*argv, *args], cwd=REPO, env=env, capture_output=capture, text=True)


def optimize(
    label: str, example: str, target: str, out: Path, store: Path, kernel: Path, extra: list[str]
) -> dict:
    t0 = time.perf_counter()
    done = tlxdb(
        "optimize",
        "--kernel",
        str(kernel),
        # the bundle's files one by one, without its budget.json: the flags below then hold
        *(
            x
            for name in ("harness.py", "cases.json", "target.json")
            for x in (f"--{name.split('.')[0]}", str(REPO / "examples" / example / target / name))
        ),
        "--store",
        str(store),
        "--output-dir",
        str(out / f"run_{label}"),
        "--no-commit-winner",
        "--result-format",
        "summary",
        *extra,
    )
    (out / f"{label}_log.txt").write_text(done.stderr)
    return {
        "exit_code": done.returncode,
        "seconds": time.perf_counter() - t0,
        "stdout": done.stdout,
    }


def veto_sources() -> tuple[str, str]:
    """A baseline that wastes a copy of its input around the kernel at its best setting, and a
    candidate without the copy at a worse num_warps (docs/MEASUREMENTS.md: 16 warps 4.04 TB/s,
    2 warps 3.28 TB/s on the one-block path)."""
    src = (REPO / "examples" / "softmax" / "kernel.py").read_text()
    launch = "BLOCK=128, num_warps=4)"
    assert launch in src
    base = src.replace(launch, "BLOCK=8192, num_warps=16)").replace(
        "    y = torch.empty_like(x)\n",
        "    x = x.clone()  # a wasted copy\n    y = torch.empty_like(x)\n",
    )
    cand = src.replace(launch, "BLOCK=8192, num_warps=2)")
    return base, cand


def in_run_overhead(out: Path) -> list[dict[str, Any]]:
    """Per candidate of every run folder under `out`: its wall time from proposal to decision,
    the part of it Proton and the ncu child took (from the events), and their share of the rest."""
    from datetime import datetime

    rows = []
    for log in sorted(out.glob("run_*/events.jsonl")):
        records = [json.loads(line) for line in log.read_text().splitlines()]
        proposed: dict[str, datetime] = {}
        decided: dict[str, datetime] = {}
        spent: dict[str, list[float]] = {}
        for r in records:
            p, at = r["payload"], datetime.fromisoformat(r["recorded_at"])
            cid = p.get("candidate_id")
            if r["type"] == "CandidateProposed":
                proposed[cid] = at
            elif r["type"] == "DecisionMade":
                decided.setdefault(cid, at)
            elif r["type"] == "ProfileCollected" and cid not in decided:
                cost = spent.setdefault(cid, [0.0, 0.0])
                for m in p["metrics"]:
                    if m["name"] == "profiling_wall_ms" and m["source"] == "proton":
                        cost[0] += (m["value"] or 0.0) / 1e3
                    elif m["name"] == "ncu_child_wall_ms":
                        cost[1] = (m["value"] or 0.0) / 1e3
        for cid, at in decided.items():
            if cid not in proposed:
                continue
            wall = (at - proposed[cid]).total_seconds()
            proton_s, ncu_s = spent.get(cid, [0.0, 0.0])
            rest = wall - proton_s - ncu_s
            rows.append(
                {
                    "run": log.parent.name,
                    "candidate": cid,
                    "wall_s": wall,
                    "proton_s": proton_s,
                    "ncu_s": ncu_s,
                    "overhead_fraction": (proton_s + ncu_s) / rest if rest > 0 else None,
                }
            )
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--examples", default="softmax,rmsnorm,matmul")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--target", default="hopper", choices=["hopper", "host"])
    ap.add_argument("--no-veto", action="store_true")
    ap.add_argument("--no-cold", action="store_true", help="skip timing a cold deep ncu child")
    ap.add_argument("--run-seconds", type=int, default=90, help="--max-total-seconds of a run")
    ap.add_argument("--stages", default="overhead,runs,veto", help="and/or: in_run")
    a = ap.parse_args()
    out = a.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    store = out / "store.duckdb"
    stages = set(a.stages.split(","))
    if stages == {"in_run"}:  # only the per-candidate cost inside the runs already in --out
        print(json.dumps(in_run_overhead(out), indent=1))
        return 0
    common = ["--max-cv", "1.0"] if a.target == "host" else []  # the interpreter's timing noise
    examples = [e for e in a.examples.split(",") if e]
    report: dict[str, Any] = {"target": a.target, "overhead": [], "runs": {}, "veto": None}

    def save() -> None:
        (out / "profiling.json").write_text(json.dumps(report, indent=1, default=str))

    for ex in examples if "overhead" in stages else []:
        try:
            report["overhead"].append(overhead(ex, a.target, a.repeats, not a.no_cold))
        except Exception as e:  # keep the other stages' evidence
            report["overhead"].append({"example": ex, "error": repr(e)})
        save()
        print(
            ex,
            "overhead",
            json.dumps(report["overhead"][-1].get("repeats", report["overhead"][-1]), default=str)[
                :600
            ],
            flush=True,
        )
    if "veto" in stages and not a.no_veto and "softmax" in examples:
        base, cand = veto_sources()
        (out / "veto_baseline.py").write_text(base)
        (out / "veto_candidate.py").write_text(cand)
        command = f"cp {out / 'veto_candidate.py'} candidate.py"
        one = ["--candidates-per-round", "1"]
        report["veto"] = optimize(
            "veto",
            "softmax",
            a.target,
            out,
            store,
            out / "veto_baseline.py",
            [
                "--provider",
                "command",
                "--provider-command",
                command,
                "--max-rounds",
                "1",
                *one,
                *common,
            ],
        )
        save()
    for ex in examples if "runs" in stages else []:
        kernel = REPO / "examples" / ex / "kernel.py"
        tune = ["--provider", "tune", "--max-rounds", str(a.rounds), *common]
        tune += ["--candidates-per-round", "1", "--max-total-seconds", str(a.run_seconds)]
        report["runs"][ex] = optimize(ex, ex, a.target, out, store, kernel, tune)
        save()
        print(
            ex,
            "run",
            report["runs"][ex]["exit_code"],
            f"{report['runs'][ex]['seconds']:.0f} s",
            flush=True,
        )
    report["in_run_overhead"] = in_run_overhead(out)
    views = {}
    for name, sql in VIEWS_SQL.items():
        done = tlxdb("query", "--store", str(store), "--format", "json", sql)
        views[name] = done.stdout if done.returncode == 0 else done.stderr
    (out / "views.json").write_text(json.dumps(views, indent=1))
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
