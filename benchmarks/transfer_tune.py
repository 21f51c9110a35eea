"""Issue 30's transfer evidence: does a tune run on new shapes start from what a run on other
shapes of the same kernel found?

    python benchmarks/transfer_tune.py --phase first --out DIR
    python benchmarks/transfer_tune.py --phase cold --out DIR --warm-best DIR1/warm_best.py

The kernel is the corpus tuple GEMM (tests/optimizer/providers/tune_corpus/tuple_gemm) at
style_tune's GEMM_START knobs, fp16, on a copy of examples/matmul/hopper (harness and target)
with this script's cases (SET_A, SET_B) and budget (4 repetitions; max_rounds as below). Every
run's kernel lies in a folder named tuple_gemm, so all runs have one kernel identity
(run_identity: entry point @ folder/kernel.py) and the store's nearest_history view links them.

- `--phase first`: run 1 on set A (36 candidates, store DIR/history.duckdb, label `first`), then
  the warm run on set B (12 candidates, the same store, label `warm`): tune seeds the warm run's
  first proposals (--history-seeds, default 2) from run 1's winners. Writes DIR/transfer_first.json
  (both runs' summaries, and which warm candidates were seeds from run 1) and DIR/warm_best.py
  (the warm winner's source; the start's where the warm run promoted nothing).
- `--phase cold`: the cold run on set B (36 candidates, a fresh store DIR/cold.duckdb, label
  `cold`), then torch.matmul, the start, the cold winner and the warm winner (--warm-best) timed in
  alternation in this process (hopper_tune.alternated_times, --rounds) on set B. Writes
  DIR/transfer_summary.json and .md: cold and warm side by side, candidates run and to best,
  winner knobs, alternated microseconds per case and the warm/cold ratio (the goal: <= 1.02 on
  every case, the warm run's best within 12 candidates). The warm run's summary comes from
  --first-summary (default: transfer_first.json next to --warm-best).
- `--phase table`: the same summary from what a cold or again phase left in DIR, for a call cut
  short after its cold run (no alternated timing: the ratio is of the runs' own final medians,
  and the summary says whether the warm and cold winners are one source).

Two device calls of about 500 s each must hold these runs, so each bundle copy's harness times a
sample with `do_bench(..., warmup=5, rep=25)` instead of do_bench's defaults (25 ms warm-up, 100 ms
of repetitions): a tune sample then costs about a quarter of the time. The alternated timing
uses the unmodified examples/matmul/hopper harness (default do_bench), as style_tune's does.
--max-total-seconds is a safety net: the phase's time budget, given to its runs as budget.json's
max_total_seconds (in the first phase run 1 gets 36/48 of it, the warm run what is left).

`--target host` runs both phases on the CPU interpreter (TRITON_INTERPRET=1) with
examples/matmul/host's bundle, small float32 cases (128-256 wide: smaller ones fit one tile, and
the interpreter's noise then hides every change, so run 1 promotes nothing to seed from),
--first-rounds/--warm-rounds/--cold-rounds, and no alternated timing (the ratio is then of the
runs' own final medians): how the script is tested without a GPU.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))

from hopper_sweep import environment, references, target_problem  # noqa: E402
from hopper_tune import alternated_times, run_optimize, summarize, tlxdb_command  # noqa: E402
from style_tune import GEMM_START, kernel_source  # noqa: E402

from optimizer.providers.knobs import apply_knobs  # noqa: E402

KERNEL = "tuple_gemm"
GOAL_RATIO = 1.02  # warm time at most 2% above the cold run's best, per case
ROUNDS = {"first": 36, "warm": 12, "cold": 36}
REPETITIONS = 4
DO_BENCH = 'triton.testing.do_bench(lambda: artifact(a, b), return_mode="median")'
SHORT_DO_BENCH = (
    'triton.testing.do_bench(lambda: artifact(a, b), warmup=5, rep=25, return_mode="median")'
)


def _case(m: int, n: int, k: int, dtype: str, case_id: str | None = None) -> dict[str, Any]:
    return {
        "case_id": case_id or f"{m}x{n}x{k}",
        "parameters": {"M": m, "N": n, "K": k, "dtype": dtype},
        "weight": 1.0,
    }


# target -> set -> cases
CASES: dict[str, dict[str, list[dict[str, Any]]]] = {
    "hopper": {
        "A": [_case(4096, 4096, 4096, "float16", "4096^3"), _case(8192, 4096, 2048, "float16")],
        "B": [_case(6144, 6144, 3072, "float16"), _case(3072, 8192, 4096, "float16")],
    },
    "host": {
        "A": [_case(128, 128, 64, "float32"), _case(256, 64, 32, "float32")],
        "B": [_case(192, 192, 64, "float32"), _case(128, 256, 128, "float32")],
    },
}
SET_OF = {"first": "A", "warm": "B", "cold": "B"}


def make_bundle(
    label: str, out: Path, target: str, budget: dict[str, Any]
) -> tuple[Path, Path, list[dict]]:
    """(kernel file, bundle folder, cases) of one run under OUT/bundles/<label>/: the kernel at
    OUT/bundles/<label>/tuple_gemm/kernel.py (one kernel identity for every run), the example's
    bundle with this run's cases and budget, and on the GPU the shortened do_bench."""
    folder = out / "bundles" / label
    bundle = folder / target
    shutil.copytree(REPO / "examples" / "matmul" / target, bundle, dirs_exist_ok=True)
    cases = CASES[target][SET_OF[label]]
    (bundle / "cases.json").write_text(json.dumps(cases, indent=1) + "\n")
    base = json.loads((bundle / "budget.json").read_text())
    (bundle / "budget.json").write_text(json.dumps({**base, **budget}, indent=1) + "\n")
    if target == "hopper":
        harness = bundle / "harness.py"
        text = harness.read_text()
        if DO_BENCH not in text:
            raise SystemExit(f"transfer_tune: {harness} no longer holds `{DO_BENCH}`")
        harness.write_text(text.replace(DO_BENCH, SHORT_DO_BENCH))
    kernel = folder / KERNEL / "kernel.py"
    kernel.parent.mkdir(parents=True, exist_ok=True)
    kernel.write_text(apply_knobs(kernel_source(KERNEL), GEMM_START))
    return kernel, bundle, cases


SEED = re.compile(r"^The configuration that won on the nearest history \(.*, run (\S+)\)")


def seeds(run: dict[str, Any]) -> list[dict[str, Any]]:
    """The run's candidates that tune proposed as nearest-history seeds (their hypothesis names
    the run whose winner they re-measure), in order."""
    found = []
    for e in (run["result"] or {}).get("experiments", []):
        m = SEED.match(e["hypothesis"])
        if m:
            found.append(
                {"candidate_id": e["candidate_id"], "from_run_id": m.group(1), "knobs": e["knobs"]}
            )
    return found


def tune(
    label: str, out: Path, store: Path, target: str, rounds: int, seconds: float | None
) -> tuple[dict[str, Any], dict[str, Any], Path, list[dict]]:
    """One tune run: (its summary, the raw run, its start kernel, its cases)."""
    budget: dict[str, Any] = {"max_rounds": rounds, "benchmark_repetitions": REPETITIONS}
    if seconds is not None:
        budget["max_total_seconds"] = max(seconds, 1.0)
    kernel, bundle, cases = make_bundle(label, out, target, budget)
    run = run_optimize(label, kernel, bundle, out, store, [])
    summary = summarize("matmul", cases, run, references("matmul", cases, target == "hopper"))
    summary = {"label": label, "set": SET_OF[label], "max_rounds": rounds, **summary}
    summary["seeds"] = seeds(run)
    print(
        f"{label}: exit {run['exit_code']}, {summary['candidates']} candidates in "
        f"{summary['seconds']} s, best {summary['best_knobs']} after "
        f"{summary['candidates_to_best']}, stop {summary['stopping_reason']}",
        file=sys.stderr,
        flush=True,
    )
    if run["result"] is None:
        print(run["stderr_tail"], file=sys.stderr)
    return summary, run, kernel, cases


def best_source(summary: dict[str, Any], out: Path, start: Path) -> str:
    """The run's winner's source; the start's where it promoted nothing."""
    best = summary["winner_id"]
    path = out / summary["label"] / "experiments" / best / "kernel.py" if best else start
    return path.read_text()


def phase_first(args: argparse.Namespace) -> int:
    store = args.out / "history.duckdb"
    started = time.monotonic()
    total = args.max_total_seconds
    share = (
        None
        if total is None
        else total * args.first_rounds / (args.first_rounds + args.warm_rounds)
    )
    first, _, _, _ = tune("first", args.out, store, args.target, args.first_rounds, share)
    left = None if total is None else total - (time.monotonic() - started)
    warm, _, start, _ = tune("warm", args.out, store, args.target, args.warm_rounds, left)
    write_first(args, store, first, warm, start)
    return 0 if first["run_id"] and warm["run_id"] else 1


def write_first(
    args: argparse.Namespace, store: Path, first: dict, warm: dict, start: Path
) -> None:
    """DIR/transfer_first.json (run 1's and the warm run's summaries, the warm seeds that came
    from run 1) and DIR/warm_best.py (the warm winner's source; the start's where none won)."""
    (args.out / "warm_best.py").write_text(best_source(warm, args.out, start))
    report = {
        "environment": environment(),
        "target": args.target,
        "store": str(store),
        "runs": [first, warm],
        "warm_seeds_from_first": [s for s in warm["seeds"] if s["from_run_id"] == first["run_id"]],
    }
    (args.out / "transfer_first.json").write_text(json.dumps(report, indent=1))


def phase_again(args: argparse.Namespace) -> int:
    """The warm and cold runs of one call, run 1 taken from an earlier first phase: its export
    (--first-export, imported into a fresh history store) and its summary (--first-summary).
    For a first phase whose warm run has to be measured again."""
    if args.first_export is None or args.first_summary is None:
        print(
            "transfer_tune: --phase again needs --first-export and --first-summary", file=sys.stderr
        )
        return 1
    store = args.out / "history.duckdb"
    done = subprocess.run(
        [*tlxdb_command(), "import", "--store", str(store), str(args.first_export)],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        print(f"transfer_tune: importing run 1 failed: {done.stderr.strip()}", file=sys.stderr)
        return 1
    first = {r["label"]: r for r in json.loads(args.first_summary.read_text())["runs"]}["first"]
    total = args.max_total_seconds
    started = time.monotonic()
    share = (
        None if total is None else total * args.warm_rounds / (args.warm_rounds + args.cold_rounds)
    )
    warm, _, start, _ = tune("warm", args.out, store, args.target, args.warm_rounds, share)
    write_first(args, store, first, warm, start)
    args.warm_best, args.first_summary = args.out / "warm_best.py", args.out / "transfer_first.json"
    if total is not None:
        args.max_total_seconds = max(total - (time.monotonic() - started), 1.0)
    return phase_cold(args)


def _first_report(args: argparse.Namespace) -> dict[str, Any] | None:
    """The first phase's transfer_first.json (--first-summary, default next to --warm-best);
    None, with the reason on stderr, where it or warm_best.py is missing."""
    if args.warm_best is None or not args.warm_best.is_file():
        print(
            f"transfer_tune: --phase {args.phase} needs --warm-best FILE "
            "(first phase's warm_best.py)",
            file=sys.stderr,
        )
        return None
    first_path = args.first_summary or args.warm_best.parent / "transfer_first.json"
    if not first_path.is_file():
        print(
            f"transfer_tune: no first-phase summary at {first_path} (--first-summary)",
            file=sys.stderr,
        )
        return None
    return json.loads(first_path.read_text())


def phase_cold(args: argparse.Namespace) -> int:
    first_report = _first_report(args)
    if first_report is None:
        return 1
    cold, _, start, cases = tune(
        "cold",
        args.out,
        args.out / "cold.duckdb",
        args.target,
        args.cold_rounds,
        args.max_total_seconds,
    )
    cold_source = best_source(cold, args.out, start)
    alternated = None
    if args.target == "hopper":
        sources = {
            "start": start.read_text(),
            "cold": cold_source,
            "warm": args.warm_best.read_text(),
        }
        bundle = REPO / "examples" / "matmul" / "hopper"  # the unshortened harness
        alternated = alternated_times("matmul", bundle, cases, sources, args.rounds)
    write_summary(args, first_report, cold, cases, alternated, cold_source)
    return 0 if cold["run_id"] else 1


def phase_table(args: argparse.Namespace) -> int:
    """The summary of a cold (or again) phase from the files it left in DIR, for a call cut
    short after its cold run: DIR/cold_result.json, DIR/cold/events.jsonl (the run's seconds),
    DIR/bundles/cold/<target>/cases.json, DIR/transfer_first.json and DIR/warm_best.py. No
    alternated timing is measured here: the warm/cold ratio is of the runs' own final medians,
    and the summary says whether the two winners are one source."""
    args.warm_best = args.warm_best or args.out / "warm_best.py"
    first_report = _first_report(args)
    needed = [
        args.out / "cold_result.json",
        args.out / "cold" / "events.jsonl",
        args.out / "bundles" / "cold" / args.target / "cases.json",
    ]
    missing = [str(p) for p in needed if not p.is_file()]
    if first_report is None or missing:
        if missing:
            print(f"transfer_tune: --phase table: missing {', '.join(missing)}", file=sys.stderr)
        return 1
    result = json.loads(needed[0].read_text())
    stamps = [
        datetime.fromisoformat(json.loads(line)["recorded_at"])
        for line in needed[1].read_text().splitlines()
        if line.strip()
    ]
    run = {
        "exit_code": 0 if result.get("success") else 2,
        "seconds": (max(stamps) - min(stamps)).total_seconds(),
        "result": result,
    }
    cases = json.loads(needed[2].read_text())
    cold = summarize("matmul", cases, run, {})
    cold = {"label": "cold", "set": SET_OF["cold"], "max_rounds": args.cold_rounds, **cold}
    cold["seeds"] = seeds(run)
    start = args.out / "bundles" / "cold" / KERNEL / "kernel.py"
    write_summary(args, first_report, cold, cases, None, best_source(cold, args.out, start))
    return 0 if cold["run_id"] else 1


def write_summary(
    args: argparse.Namespace,
    first_report: dict[str, Any],
    cold: dict[str, Any],
    cases: list[dict],
    alternated: dict[str, dict[str, float]] | None,
    cold_source: str,
) -> None:
    """DIR/transfer_summary.json and .md: the cold and warm runs side by side, per case the
    alternated microseconds (or, without them, each run's own final median) and the warm/cold
    ratio, and the goal."""
    runs = {r["label"]: r for r in first_report["runs"]}
    first, warm = runs["first"], runs["warm"]
    rows = []
    for case in cases:
        cid = case["case_id"]
        if alternated:
            times = alternated[cid]
            cold_us, warm_us, basis = times["cold"], times["warm"], "alternated"
        else:  # each run's own final median (no alternated timing on the host)
            times = None
            cold_us = next((c["final_us"] for c in cold["cases"] if c["case_id"] == cid), None)
            warm_us = next((c["final_us"] for c in warm["cases"] if c["case_id"] == cid), None)
            basis = "run final medians"
        ratio = None if cold_us is None or warm_us is None else warm_us / cold_us
        rows.append(
            {
                "case_id": cid,
                "alternated_us": times,
                "cold_us": cold_us,
                "warm_us": warm_us,
                "warm_over_cold": ratio,
                "basis": basis,
                "within_2pct": ratio is not None and ratio <= GOAL_RATIO,
            }
        )
    seeded = first_report["warm_seeds_from_first"]
    same_source = args.warm_best.read_text() == cold_source
    goal = {
        "ratio": GOAL_RATIO,
        "warm_candidates": ROUNDS["warm"],
        "met": bool(rows)
        and all(r["within_2pct"] for r in rows)
        and warm["candidates_to_best"] is not None
        and warm["candidates_to_best"] <= ROUNDS["warm"],
        "judged_on": rows[0]["basis"] if rows else None,
        "winners_one_source": same_source,
    }
    report = {
        "environment": environment(),
        "target": args.target,
        "first": first,
        "warm": warm,
        "cold": cold,
        "warm_seeds_from_first": seeded,
        "cases": rows,
        "goal": goal,
    }
    (args.out / "transfer_summary.json").write_text(json.dumps(report, indent=1))
    table = markdown(first, warm, cold, rows, seeded, goal)
    (args.out / "transfer_summary.md").write_text(table + "\n")
    print(table)


def markdown(
    first: dict, warm: dict, cold: dict, rows: list[dict], seeded: list[dict], goal: dict
) -> str:
    ids = [r["case_id"] for r in rows]
    basis = rows[0]["basis"] if rows else ""
    head = (
        "| run | store | cases | candidates run | candidates to best | stop | winner | "
        + " | ".join(f"{c} us ({basis})" for c in ids)
        + " |"
    )
    lines = [head, "|---|---|---|---:|---:|---|---|" + "---:|" * len(ids)]
    for label, s, store in (
        ("cold", cold, "fresh"),
        ("warm", warm, f"run 1's ({first['run_id']}, set A, {first['candidates']} candidates)"),
    ):
        us = [r[f"{label}_us"] for r in rows]
        winner = f"{s['winner_id']} {s['best_knobs']}" if s["winner_id"] else "none: the start"
        lines.append(
            f"| {label} ({s['run_id']}) | {store} | set B | {s['candidates']} "
            f"| {s['candidates_to_best']} | {s['stopping_reason']} | {winner} | "
            + " | ".join("" if u is None else f"{u:.1f}" for u in us)
            + " |"
        )
    lines.append(
        "| warm / cold |  |  |  |  |  |  | "
        + " | ".join(
            "" if r["warm_over_cold"] is None else f"{r['warm_over_cold']:.3f}" for r in rows
        )
        + " |"
    )
    seed_text = ", ".join(
        f"{s['candidate_id']} {s['knobs']} from {s['from_run_id']}" for s in seeded
    )
    lines += [
        "",
        f"Warm seeds from run 1: {seed_text or 'none'}.",
        f"Goal (warm <= {goal['ratio']} x cold on every case, warm best within "
        f"{goal['warm_candidates']} candidates): {'met' if goal['met'] else 'not met'}.",
        "The warm and cold winners are "
        + ("one source (byte for byte)." if goal["winners_one_source"] else "different sources."),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--phase", required=True, choices=["first", "cold", "again", "table"])
    ap.add_argument("--first-export", type=Path, help="again: run 1's export (tlxdb export)")
    ap.add_argument("--out", required=True, type=Path, help="folder for results and stores")
    ap.add_argument("--target", default="hopper", choices=["hopper", "host"])
    ap.add_argument("--warm-best", type=Path, help="cold phase: the first phase's warm_best.py")
    ap.add_argument(
        "--first-summary",
        type=Path,
        help="cold phase: the first phase's transfer_first.json (default: next to --warm-best)",
    )
    ap.add_argument("--rounds", type=int, default=7, help="alternations after the cold run (GPU)")
    ap.add_argument(
        "--max-total-seconds",
        type=float,
        help="the phase's time budget, given to its runs as max_total_seconds (a safety net)",
    )
    for label, n in ROUNDS.items():
        ap.add_argument(f"--{label}-rounds", type=int, default=n, help=f"default {n}")
    args = ap.parse_args(argv)
    problem = args.phase != "table" and target_problem("transfer_tune", args.target)
    if problem:
        print(problem, file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    return {"first": phase_first, "cold": phase_cold, "again": phase_again, "table": phase_table}[
        args.phase
    ](args)


if __name__ == "__main__":
    sys.exit(main())
