"""tlxdb's own profiling on each example: its cost per candidate, and what it records in a run.

    python benchmarks/h200_profiling.py --out DIR [--examples softmax,rmsnorm,matmul]
        [--rounds 2] [--repeats 3] [--candidates 2] [--target hopper|host] [--no-veto]
        [--stages overhead,runs,veto]

Per example (the bundles have no harness profile()):
1. Overhead: the example's candidates (its warps knob moved, one new kernel each) evaluated one
   after another as the run loop does it, with the evaluator and the ncu profiler of a run: the
   next candidate's child prestarted after each last sample, and with profiling, the ncu child
   begun and settled before the benchmark, Proton's attribution after it and the ncu summary
   profile before the next candidate. A candidate's wall time runs from the start of its
   evaluation to the start of the next one's. Sequences with and without profiling alternate
   (`--repeats` pairs, the order swapped each time), after one untimed sequence that compiles
   every variant; the first candidate of each sequence, which finds no child ready, is left out.
   The overhead is the mean wall time per candidate with profiling over the same without, less
   one; the issue's bound is 25%. Every candidate's benchmark samples are kept: profiling adds
   none of them.
2. One `tlxdb optimize --provider tune --max-rounds R` run per example into one store, then
   `tlxdb query`-able views dumped: per candidate and case, whether it has attribution, an ncu
   summary or the deep set, and its roofline row; and per candidate, from its ProfilingFinished
   events, what profiling took inside the run and how much of it the candidate waited for.
3. (softmax only, unless --no-veto) the ncu veto: a baseline whose wrapper makes a wasted copy of
   its input and launches the kernel at its best setting, and a candidate without the copy but at
   a worse num_warps: faster end to end, slower in its main kernel. A run with `--provider command`
   proposes it; its decision and the ncu times are recorded.

Everything lands in DIR (profiling.json, overhead.md, the run logs and folders, views.json).
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
from optimizer.providers.knobs import apply_knobs, knob_values  # noqa: E402
from tlxstore.events import (  # noqa: E402
    BenchmarkSampled,
    Event,
    ProfileCollected,
    ProfilingFinished,
)

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


def variants(source: str, count: int) -> list[str]:
    """`count` candidates of the example: its warps knob moved to a different value in each
    (so each one is a new kernel to compile, as a tune run's candidates are)."""
    values = knob_values(source)
    warps = next(k for k in values if k.lower() == "num_warps")
    choices = [w for w in (8, 2, 16, 1, 4, 32) if w != values[warps]]
    return [apply_knobs(source, {warps: w}) for w in choices[:count]]


def sequence(
    ev: Evaluator, ncu: NcuProfiler, sources: list[str], label: str, profile: bool
) -> list[dict[str, Any]]:
    """The candidates one after another as the run loop handles them (one per round): the
    evaluator keeps the next child ready; with `profile`, the ncu child is begun, settled before
    the benchmark and prestarted after it, Proton attributes each candidate, and ncu profiles it
    (summary set) before the next one starts. Per candidate: its wall time from the start of its
    evaluation to the start of the next one's, and what profiling cost on that path."""
    rows = []
    bundle = ev.bundle
    for i, source in enumerate(sources):
        events: list[Event] = []
        t0 = time.perf_counter()
        if profile:
            ncu.begin(source)
        ev.evaluate(
            EvalRequest(
                candidate_id=f"{label}{i}",
                source=source,
                repetitions=10,
                timeout_s=600.0,
                profile=profile,
            ),
            events.append,
            before_benchmark=ncu.settle if profile else None,
            after_benchmark=ncu.prestart if profile else None,
        )
        evaluated_s = time.perf_counter() - t0
        ncu_result = None
        kernel = main_kernel(events, source)
        if profile and kernel is not None and ncu.unavailable() is None:
            ncu_result = ncu.profile(
                f"{label}{i}", source, bundle.cases, kernel, Level.SUMMARY, 600
            )
        elif profile:
            ncu.skip()
        phases = [e for e in events if isinstance(e, ProfilingFinished)]
        rows.append(
            {
                "candidate": f"{label}{i}",
                "wall_s": time.perf_counter() - t0,
                "evaluation_s": evaluated_s,
                "proton_s": sum(p.waited_ms for p in phases) / 1e3,
                "ncu_settle_s": ncu_result.settle_ms / 1e3 if ncu_result else None,
                "ncu_profile_s": ncu_result.wall_ms / 1e3 if ncu_result else None,
                "ncu_profiled_every_case": bool(ncu_result and ncu_result.events)
                and all(e.metrics[0].value is not None for e in ncu_result.events),
                "samples": samples(events),
                "ncu_diagnostics": ncu_result.diagnostics if ncu_result else [],
            }
        )
    return rows


def samples(events: list[Event]) -> dict[str, list[float]]:
    return {e.case_id: e.samples_us for e in events if isinstance(e, BenchmarkSampled)}


def main_kernel(events: list[Event], source: str) -> str | None:
    for e in events:
        if isinstance(e, ProfileCollected) and e.kernel_names and e.metrics[0].source == "proton":
            return e.kernel_names[0]
    own = kernel_functions(source)
    return own[0] if own else None


def overhead(example: str, target: str, repeats: int, candidates: int) -> dict[str, Any]:
    """Stage 1 (see the module doc): sequences of `candidates` + 1 candidates (the first, which
    finds no child ready, is left out of the figures) without and with profiling, alternating
    which goes first, after one untimed sequence that compiles every variant."""
    bundle = bundle_of(example, target)
    source = (REPO / "examples" / example / "kernel.py").read_text()
    sources = variants(source, candidates + 1)
    ev = Evaluator(bundle)
    ev.keep_ready = True
    ncu = NcuProfiler(ev)
    runs = []
    try:
        sequence(ev, ncu, sources, "warm", profile=False)  # compiles every variant once
        for r in range(repeats):
            order = (False, True) if r % 2 == 0 else (True, False)
            for profile in order:
                rows = sequence(ev, ncu, sources, f"{'p' if profile else 'n'}{r}c", profile)
                runs.append({"repeat": r, "profile": profile, "candidates": rows})
    finally:
        ev.close()
        ncu.close()

    def per_candidate(profile: bool, r: int) -> float:
        (run,) = [x for x in runs if x["repeat"] == r and x["profile"] is profile]
        walls = [c["wall_s"] for c in run["candidates"][1:]]
        return sum(walls) / len(walls)

    fractions = [per_candidate(True, r) / per_candidate(False, r) - 1.0 for r in range(repeats)]
    return {
        "example": example,
        "candidates_per_sequence": candidates + 1,
        "per_candidate_s": {
            "without_profiling": [per_candidate(False, r) for r in range(repeats)],
            "with_profiling": [per_candidate(True, r) for r in range(repeats)],
        },
        "overhead_fraction": fractions,
        "overhead_fraction_median": statistics.median(fractions),
        "sequences": runs,
    }


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
    """Per candidate of every run folder under `out`: its wall time from proposal to decision
    and, from its ProfilingFinished events, what each profiler took and how much of it the
    candidate waited for (the rest ran beside other work)."""
    from datetime import datetime

    rows = []
    for log in sorted(out.glob("run_*/events.jsonl")):
        records = [json.loads(line) for line in log.read_text().splitlines()]
        proposed: dict[str, datetime] = {}
        decided: dict[str, datetime] = {}
        phases: dict[str, dict[str, dict[str, Any]]] = {}
        for r in records:
            p, at = r["payload"], datetime.fromisoformat(r["recorded_at"])
            cid = p.get("candidate_id")
            if r["type"] == "CandidateProposed":
                proposed[cid] = at
            elif r["type"] == "DecisionMade":
                decided.setdefault(cid, at)
            elif r["type"] == "ProfilingFinished" and cid not in decided:
                phases.setdefault(cid, {})[p["tool"]] = p
        for cid, at in decided.items():
            if cid not in proposed:
                continue
            wall = (at - proposed[cid]).total_seconds()
            got = phases.get(cid, {})
            waited = sum(x["waited_ms"] for x in got.values()) / 1e3
            rows.append(
                {
                    "run": log.parent.name,
                    "candidate": cid,
                    "wall_s": wall,
                    "proton_waited_s": got.get("proton", {}).get("waited_ms", 0.0) / 1e3,
                    "ncu_level": got.get("ncu", {}).get("level"),
                    "ncu_wall_s": got.get("ncu", {}).get("wall_ms", 0.0) / 1e3,
                    "ncu_waited_s": got.get("ncu", {}).get("waited_ms", 0.0) / 1e3,
                    "waited_fraction_of_rest": waited / (wall - waited) if wall > waited else None,
                }
            )
    return rows


def summary_table(report: dict[str, Any]) -> str:
    """The overhead figures as a Markdown table (written beside profiling.json)."""
    lines = [
        "| example | per candidate without profiling (s) | with profiling (s) | overhead per repeat | median |",
        "|---|---|---|---|---|",
    ]
    for o in report["overhead"]:
        if "error" in o:
            lines.append(f"| {o['example']} | error: {o['error']} | | | |")
            continue
        per = o["per_candidate_s"]
        lines.append(
            f"| {o['example']} | {', '.join(f'{x:.2f}' for x in per['without_profiling'])} "
            f"| {', '.join(f'{x:.2f}' for x in per['with_profiling'])} "
            f"| {', '.join(f'{x:+.1%}' for x in o['overhead_fraction'])} "
            f"| **{o['overhead_fraction_median']:+.1%}** |"
        )
    lines += [
        "",
        "Benchmark samples per candidate and case, without / with profiling (count; median of the",
        "medians over the repeats, us):",
        "",
        "| example | candidate | case | samples | median without | median with |",
        "|---|---|---|---|---|---|",
    ]
    for o in report["overhead"]:
        for i, case, counts, without, with_ in sample_rows(o.get("sequences", [])):
            lines.append(
                f"| {o['example']} | {i} | {case} | {counts} | {without:.1f} | {with_:.1f} |"
            )
    return "\n".join(lines) + "\n"


def sample_rows(runs: list[dict[str, Any]]) -> list[tuple[int, str, str, float, float]]:
    """(candidate index, case, sample counts, median without, median with) of the sequences."""
    got: dict[tuple[int, str, bool], list[list[float]]] = {}
    for run in runs:
        for i, cand in enumerate(run["candidates"]):
            for case, values in cand["samples"].items():
                got.setdefault((i, case, run["profile"]), []).append(values)
    rows = []
    for (i, case, profile), lists in sorted(got.items()):
        other = got.get((i, case, True))
        if profile or not other:
            continue
        counts = f"{sorted({len(x) for x in lists})} / {sorted({len(x) for x in other})}"
        rows.append(
            (
                i,
                case,
                counts,
                statistics.median(statistics.median(x) for x in lists),
                statistics.median(statistics.median(x) for x in other),
            )
        )
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--examples", default="softmax,rmsnorm,matmul")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--target", default="hopper", choices=["hopper", "host"])
    ap.add_argument("--no-veto", action="store_true")
    ap.add_argument("--candidates", type=int, default=2, help="measured candidates a sequence")
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
            report["overhead"].append(overhead(ex, a.target, a.repeats, a.candidates))
        except Exception as e:  # keep the other stages' evidence
            report["overhead"].append({"example": ex, "error": repr(e)})
        save()
        last = report["overhead"][-1]
        print(
            ex,
            "overhead",
            json.dumps({k: v for k, v in last.items() if k != "sequences"}, default=str)[:800],
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
    (out / "overhead.md").write_text(summary_table(report))
    print(summary_table(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
