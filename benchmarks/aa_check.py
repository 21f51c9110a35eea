"""A/A decisions through the real loop: candidates equal to the incumbent but for a no-op constant.

    python benchmarks/aa_check.py --kernel K --bundle B --out DIR [--decisions 20]
        [--max-excluding N] [--cases cases.json] [--knobs '{"BLOCK_M": 128}'] [tlxdb flags]

One `tlxdb optimize` run (optimizer.run.lifecycle, in this process; the harness children are its
own) of the kernel on a copy of the bundle without its budget.json, so that tlxdb's default
thresholds hold unless a flag below is given, with `--max-rounds N --candidates-per-round 1` and
the provider `aa-noop`, registered here through optimizer.providers.registry: each candidate is
the incumbent's source with a module constant `_AA_NOOP = <n>` appended (a new n each time, so
each candidate is a new source; nothing reads it, so it runs the incumbent's kernel). Each one is
measured in its window beside the baseline and decided by the real policy.

`--second-window always` gives every candidate a second window (policy.owes_second_window is
made to answer yes), not only those its first window would promote: a probe of how instances of
one source run apart by build order (the first window's candidate A and reference R1, then A.2,
R1.2, A.3, R1.3 built in that order), recorded per decision as `instances` (each instance's
median and its load position). Its decisions are decided on both windows, which the rule gives
only to would-be promotions: they are a probe, not the rule's A/A.

`--cases` replaces the bundle's cases.json. The kernel can be fixed to one configuration first:
`--pin-autotune I` keeps config I of its `@triton.autotune` list alone (so that every candidate
and the baseline run the same config, not each its own autotuner's pick), then `--knobs` rewrites
its knobs (optimizer.providers.knobs), e.g. a tuned configuration. The copies, the store and the
run's output folder go to --work (default: a temporary folder, removed at the end).

Writes to --out:
- aa_summary.json: the machine, versions and date, the thresholds, every decision (outcome,
  speedup, 99% interval, whether it excludes 1.0, notes, per case the medians, CVs and blocks),
  the promoted count, how many intervals exclude 1.0, and the bounds' verdict;
- aa_decisions.png: each decision's speedup with its 99% interval as an error bar, and 1.0;
- export/: the run as `tlxdb export RUN --to DIR/export` writes it (Parquet and a manifest).

Exit 0 when the bounds hold (no candidate promoted; at most --max-excluding intervals exclude
1.0, default one in twenty decisions; every asked decision made), 1 when not (the reasons are
printed). A SIGTERM (`timeout`) interrupts the run as Ctrl-C does: the decisions made so far are
summarized, and the bound on their count fails. Timings are labelled "Triton interpreter on the
CPU" when TRITON_INTERPRET=1.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))

from figures import save_png  # noqa: E402
from hopper_sweep import environment  # noqa: E402

from optimizer.bundle.loading import BUDGET, CASES, locate  # noqa: E402
from optimizer.decision import kernel, policy, stats  # noqa: E402
from optimizer.evaluation import window  # noqa: E402
from optimizer.providers import registry  # noqa: E402
from optimizer.providers.base import Proposal, ProviderContext, Recorder  # noqa: E402
from optimizer.providers.knobs import apply_knobs, find_knobs, pin_autotune  # noqa: E402
from optimizer.reporting import live  # noqa: E402
from optimizer.run import lifecycle  # noqa: E402
from tlxstore.events import (  # noqa: E402
    BASELINE_ID,
    DEFAULT_THRESHOLDS,
    CandidateProposed,
    DecisionMade,
    Envelope,
    Outcome,
    Phase,
    remeasure_window,
)
from tlxstore.export import export_runs  # noqa: E402
from tlxstore.fold import RunState, fold  # noqa: E402
from tlxstore.location import open_store  # noqa: E402
from tlxstore.version import tlxdb_version  # noqa: E402

PROVIDER = "aa-noop"
NOOP_NAME = "_AA_NOOP"
_NOOP_LINE = re.compile(rf"^{NOOP_NAME} = -?\d+.*$", re.M)
INTERPRETER = "Triton interpreter on the CPU"
# the decision thresholds a flag may set (None: tlxdb's default)
FLAGS = (
    "benchmark_repetitions",
    "max_cv",
    "min_speedup",
    "max_extra_blocks",
    "max_candidate_seconds",
    "max_total_seconds",
)


def with_noop(source: str, value: int) -> str:
    """`source` with `_AA_NOOP = value` as its last line (the value replaced where the source has
    the constant already: an incumbent that was itself an A/A candidate)."""
    line = f"{NOOP_NAME} = {value}  # A/A: a module constant nothing reads"
    if _NOOP_LINE.search(source):
        return _NOOP_LINE.sub(line, source, count=1)
    return source.rstrip("\n") + "\n\n" + line + "\n"


@dataclass
class NoopProvider:
    """Proposes the incumbent (the context's parent) with a new no-op constant each time."""

    name: str = PROVIDER
    model: str | None = None

    def propose(self, ctx: ProviderContext, record: Recorder) -> Proposal:
        value = ctx.round * 100 + ctx.candidate_index  # one slot, one value
        return Proposal(
            source=with_noop(ctx.parent_source, value),
            hypothesis=f"A/A: the incumbent {ctx.parent_id} with a no-op constant",
            change=f"{NOOP_NAME} = {value}",
            expected_effect="none: the same kernel",
            risk="none",
            knobs={NOOP_NAME: value},
        )


def prepare(args: argparse.Namespace, work: Path) -> tuple[Path, Path]:
    """(kernel, bundle) copies under `work`: the bundle without budget.json (and with --cases in
    place of its cases.json), the kernel with --pin-autotune and --knobs applied."""
    bundle = work / "bundle"
    shutil.copytree(
        args.bundle, bundle, ignore=shutil.ignore_patterns(BUDGET, "__pycache__", "*.pyc")
    )
    if args.cases is not None:
        shutil.copyfile(args.cases, bundle / CASES)
    source = args.kernel.read_text()
    if args.pin_autotune is not None:
        choices = find_knobs(source).autotune_choices
        if len(choices) != 1:
            raise SystemExit(
                f"aa_check: --pin-autotune needs one autotune list in the kernel, found {len(choices)}"
            )
        source = pin_autotune(source, choices[0].kernel, args.pin_autotune)
    if args.knobs:
        source = apply_knobs(source, json.loads(args.knobs))
    kernel = work / "kernel" / args.kernel.name
    kernel.parent.mkdir()
    kernel.write_text(source)
    return kernel, bundle


class Progress:
    """The live log (one line per step, as `tlxdb optimize` prints it) with the seconds since the
    start, on stderr."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()

    def __call__(self, env: Envelope, state: RunState) -> None:
        line = live.describe(env, state)
        if line is not None:
            print(f"[{time.monotonic() - self.t0:7.1f} s] {line}", file=sys.stderr, flush=True)


def _interrupt_on_sigterm() -> None:
    """`timeout` sends SIGTERM: end the run as Ctrl-C does (RunFinished interrupted), so that
    what was decided is summarized."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


def _blocks(state: RunState, cid: str, case_id: str) -> dict[str, Any]:
    """How many blocks (and extra blocks, for a noisy case) the candidate has in its window, and
    per block the baseline's median over the candidate's (the call-to-call variation the
    interval's first stage resamples)."""

    def by_block(member: str) -> dict[int, list[float]]:
        out: dict[int, list[float]] = {}
        for s in state.candidates[member].window_samples(cid, Phase.ROUND):
            if s.case_id == case_id:
                out.setdefault(s.block, []).extend(s.samples_us)
        return out

    mine = [
        s for s in state.candidates[cid].window_samples(cid, Phase.ROUND) if s.case_id == case_id
    ]
    cand, base = by_block(cid), by_block(BASELINE_ID)
    return {
        "blocks": len(mine),
        "extra_blocks": sum(1 for s in mine if s.extra),
        "block_ratios": [
            stats.median(base[b]) / stats.median(cand[b]) for b in sorted(cand) if b in base
        ],
    }


def _instances(state: RunState, cid: str) -> list[dict[str, Any]]:
    """The second window's instances of the candidate and the baseline, in the order the child
    built them (A, R1 in the first window; then A.2, R1.2, A.3, R1.3): per case each one's median
    over the window's samples as the decision reads them (policy.window_blocks: marked calls left
    out). Empty without a second window."""
    out = []
    for instance in range(1, window.SECOND_WINDOW_INSTANCES + 1):
        blocks = policy.window_blocks(state, remeasure_window(cid), Phase.ROUND, instance)
        for member, key in ((cid, "A"), (BASELINE_ID, "R1")):
            if member in blocks:
                out.append(
                    {
                        "member": member,
                        "key": key if instance == 1 else f"{key}.{instance}",
                        "built": len(out) + 1,
                        "median_us": {
                            case: stats.median([x for b in by_block.values() for x in b])
                            for case, by_block in blocks[member].items()
                        },
                    }
                )
    return out


def _ncu(state: RunState, cid: str, case_id: str) -> dict[str, Any]:
    """The ncu veto's evidence on one case: the candidate's main-kernel duration, the baseline's
    in its own profile (another process) and the baseline's profiled right after the candidate
    in the candidate's process, with the candidate's ratio to each (None where unknown)."""
    cand, base = state.candidates[cid], state.candidates.get(BASELINE_ID)
    c = kernel.ncu_time_us(cand, case_id)
    own = None if base is None else kernel.ncu_time_us(base, case_id)
    beside = kernel.ncu_reference_us(cand, case_id)
    return {
        "ncu_us": c,
        "ncu_baseline_own_us": own,
        "ncu_baseline_beside_us": beside,
        "ncu_ratio_own": c / own if c and own else None,
        "ncu_ratio_beside": c / beside if c and beside else None,
    }


def decisions(state: RunState, envelopes: list[Envelope]) -> list[dict[str, Any]]:
    """Every candidate's decision, in order, with what it rests on."""
    proposed_at = {
        e.event.candidate_id: e.recorded_at
        for e in envelopes
        if isinstance(e.event, CandidateProposed)
    }
    out = []
    for e in envelopes:
        d = e.event
        if not isinstance(d, DecisionMade) or d.candidate_id == BASELINE_ID:
            continue
        has_interval = d.ci_low is not None and d.ci_high is not None
        start = proposed_at.get(d.candidate_id)
        out.append(
            {
                "candidate_id": d.candidate_id,
                "outcome": d.outcome.value,
                "speedup": d.speedup,
                "ci_low": d.ci_low,
                "ci_high": d.ci_high,
                "excludes_1": has_interval and not (d.ci_low <= 1.0 <= d.ci_high),  # type: ignore[operator]
                "compared_to": d.compared_to,
                "reason": d.reason,
                "notes": d.notes,
                "seconds": None if start is None else (e.recorded_at - start).total_seconds(),
                "instances": _instances(state, d.candidate_id),
                "cases": [
                    {
                        "case_id": c.case_id,
                        "speedup": c.speedup,
                        "baseline_median_us": c.baseline_median_us,
                        "candidate_median_us": c.candidate_median_us,
                        "baseline_cv": c.baseline_cv,
                        "candidate_cv": c.candidate_cv,
                        "baseline_samples": c.baseline_samples,
                        "candidate_samples": c.candidate_samples,
                        **_blocks(state, d.candidate_id, c.case_id),
                        **_ncu(state, d.candidate_id, c.case_id),
                    }
                    for c in d.cases
                ],
            }
        )
    return out


def verdict(
    made: list[dict[str, Any]], asked: int, max_excluding: int, max_cv: float
) -> tuple[dict, list[str]]:
    """The counts the bounds are about, and each bound that failed, as text."""
    decided = [d for d in made if d["ci_low"] is not None]
    promoted = [d["candidate_id"] for d in made if d["outcome"] == Outcome.PROMOTED.value]
    excluding = [d["candidate_id"] for d in decided if d["excludes_1"]]
    counts = {
        "asked": asked,
        "decisions": len(made),
        "decisions_with_interval": len(decided),
        "promoted": len(promoted),
        "promoted_ids": promoted,
        "intervals_excluding_1": len(excluding),
        "excluding_ids": excluding,
        "max_excluding": max_excluding,
        # a case of a side noisier than max_cv in its window (measured again: extra blocks)
        "noisy_decisions": sum(
            1
            for d in made
            if any(max(c["candidate_cv"], c["baseline_cv"] or 0.0) > max_cv for c in d["cases"])
        ),
        "cases_with_extra_blocks": sum(1 for d in made for c in d["cases"] if c["extra_blocks"]),
        # the ncu veto on unchanged kernels: a veto here is ncu's noise, never a slower kernel
        "ncu_vetoes": sum(1 for d in made if "ncu veto" in (d["reason"] or "")),
    }
    failed = []
    if promoted:
        failed.append(f"{len(promoted)} A/A candidate(s) promoted: {', '.join(promoted)}")
    if len(excluding) > max_excluding:
        failed.append(
            f"{len(excluding)} of {len(decided)} 99% intervals exclude 1.0 "
            f"({', '.join(excluding)}); at most {max_excluding} allowed"
        )
    if len(decided) < asked:
        failed.append(f"only {len(decided)} of {asked} decisions have an interval")
    return counts, failed


def figure(summary: dict[str, Any], path: Path) -> None:
    """Each decision's speedup and 99% interval; 1.0 and min_speedup as lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = [d for d in summary["decisions"] if d["ci_low"] is not None]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.32 * len(made) + 2.5), 4.2))
    for i, d in enumerate(made, start=1):
        color = "tab:red" if d["excludes_1"] else "tab:blue"
        marker = "*" if d["outcome"] == Outcome.PROMOTED.value else "o"
        ax.errorbar(
            [i],
            [d["speedup"]],
            yerr=[[d["speedup"] - d["ci_low"]], [d["ci_high"] - d["speedup"]]],
            fmt=marker,
            color=color,
            capsize=3,
            ms=5 if marker == "o" else 11,
        )
    ax.axhline(1.0, color="k", lw=0.9)
    t = summary["thresholds"]
    ax.axhline(
        t["min_speedup"], color="grey", lw=0.8, ls="--", label=f"min_speedup {t['min_speedup']:g}"
    )
    ax.set_xticks(range(1, len(made) + 1))
    ax.set_xticklabels([d["candidate_id"] for d in made], rotation=90, fontsize=7)
    ax.set_ylabel("speedup over the baseline (99% CI)")
    c = summary["counts"]
    ax.set_xlim(0.4, len(made) + 0.6)
    ax.set_title(
        f"A/A: {summary['label']}\n{c['intervals_excluding_1']} of "
        f"{c['decisions_with_interval']} 99% intervals exclude 1.0 (red), {c['promoted']} "
        f"promoted\n{summary['timings']}, {summary['date'][:10]}",
        fontsize=9,
    )
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    save_png(fig, path)
    plt.close(fig)


def _git_commit() -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True
        )
    except OSError:
        return None
    return done.stdout.strip() or None


def machine(env: dict[str, Any]) -> dict[str, Any]:
    """The machine and its load as this script saw it."""
    return {
        **env,
        "tlxdb": tlxdb_version(),
        "git_commit": _git_commit(),
        "hostname": socket.gethostname(),
        "cpus": os.cpu_count(),
        "load_average": list(os.getloadavg()),
    }


def run(
    args: argparse.Namespace, work: Path
) -> tuple[lifecycle.RunResult, RunState, list[Envelope]]:
    kernel, bundle = prepare(args, work)
    flags = {"max_rounds": args.decisions, "candidates_per_round": 1}
    flags.update({f: getattr(args, f) for f in FLAGS if getattr(args, f) is not None})
    request = lifecycle.RunRequest(
        kernel=kernel,
        bundle=locate(bundle),
        store=work / "store.duckdb",
        output_dir=work / "run",
        flags=flags,
        provider=PROVIDER,
        commit=lifecycle.CommitOptions(enabled=False),
        label=f"aa_check {args.label}",
    )
    registry.register(PROVIDER, lambda options: NoopProvider())
    owes = policy.owes_second_window
    if args.second_window == "always":
        policy.owes_second_window = lambda *a, **k: True  # type: ignore[assignment]
    try:
        result = lifecycle.optimize(request, observer=Progress())
    finally:
        registry.unregister(PROVIDER)
        policy.owes_second_window = owes  # type: ignore[assignment]
    store = open_store(work / "store.duckdb", create=False)
    try:
        envelopes = store.run_envelopes(result.run_id)
        export_runs(store, [result.run_id], args.out / "export")
    finally:
        store.close()
    return result, fold(envelopes), envelopes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernel", required=True, type=Path)
    ap.add_argument("--bundle", required=True, type=Path, help="its budget.json is left out")
    ap.add_argument("--out", required=True, type=Path, help="a new or empty folder")
    ap.add_argument("--decisions", type=int, default=20, help="--max-rounds (one candidate each)")
    ap.add_argument(
        "--max-excluding",
        type=int,
        help="intervals that may exclude 1.0 (default: one in twenty decisions, rounded down)",
    )
    ap.add_argument("--cases", type=Path, help="a cases.json in place of the bundle's")
    ap.add_argument(
        "--second-window",
        choices=("rule", "always"),
        default="rule",
        help="always: every candidate gets a second window (an instance probe, not the A/A)",
    )
    ap.add_argument(
        "--pin-autotune", type=int, help="keep this config of the kernel's autotune list alone"
    )
    ap.add_argument("--knobs", help="JSON object of knob values applied to the kernel first")
    ap.add_argument("--label", help="what the figure's title names (default: kernel and bundle)")
    ap.add_argument("--work", type=Path, help="where the copies, store and run go (kept)")
    ap.add_argument("--benchmark-repetitions", type=int)
    ap.add_argument("--max-cv", type=float)
    ap.add_argument("--min-speedup", type=float)
    ap.add_argument("--max-extra-blocks", type=int)
    ap.add_argument("--max-candidate-seconds", type=float)
    ap.add_argument(
        "--max-total-seconds", type=float, help="the run's own time budget (tlxdb's flag)"
    )
    args = ap.parse_args(argv)
    if args.decisions < 1:
        ap.error("--decisions must be at least 1")
    if args.out.exists() and any(args.out.iterdir()):
        print(f"aa_check: {args.out} is not empty; choose a new --out", file=sys.stderr)
        return 1
    max_excluding = args.decisions // 20 if args.max_excluding is None else args.max_excluding
    args.label = args.label or f"{args.kernel.parent.name}/{args.kernel.name} on {args.bundle}"
    args.out.mkdir(parents=True, exist_ok=True)
    interpreted = os.environ.get("TRITON_INTERPRET") == "1"
    env = machine(environment())
    started_at = datetime.now(UTC)
    t0 = time.monotonic()
    _interrupt_on_sigterm()
    work = args.work or Path(tempfile.mkdtemp(prefix="aa_check-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        result, state, envelopes = run(args, work)
    except KeyboardInterrupt:
        print("aa_check: interrupted before the run started; nothing decided", file=sys.stderr)
        return 1
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    made = decisions(state, envelopes)
    assert state.started is not None
    counts, failed = verdict(made, args.decisions, max_excluding, state.started.thresholds.max_cv)
    summary = {
        "label": args.label,
        "date": started_at.isoformat(timespec="seconds"),
        "seconds": round(time.monotonic() - t0, 1),
        "timings": INTERPRETER if interpreted else env.get("gpu", "GPU"),
        "machine": env,
        "load_average_after": list(os.getloadavg()),
        "argv": sys.argv[1:] if argv is None else argv,
        "kernel": str(args.kernel),
        "bundle": str(args.bundle),
        "pin_autotune": args.pin_autotune,
        "second_window": args.second_window,
        "knobs": json.loads(args.knobs) if args.knobs else None,
        "cases": json.loads((args.cases or args.bundle / CASES).read_text()),
        "run_id": result.run_id,
        "stopping_reason": result.stopping_reason,
        "thresholds": state.started.thresholds.model_dump(),
        "default_thresholds": DEFAULT_THRESHOLDS.model_dump(),
        "counts": counts,
        "bounds_hold": not failed,
        "failed": failed,
        "decisions": made,
    }
    (args.out / "aa_summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
    figure(summary, args.out / "aa_decisions.png")
    print(
        f"aa_check {args.label}: {counts['decisions_with_interval']} decisions, "
        f"{counts['promoted']} promoted, {counts['intervals_excluding_1']} of the 99% intervals "
        f"exclude 1.0 (at most {max_excluding}), {counts['noisy_decisions']} with a case noisier "
        f"than max_cv, {counts['ncu_vetoes']} ncu veto(es); {summary['seconds']} s, "
        f"{summary['timings']}; stop {result.stopping_reason}"
    )
    for reason in failed:
        print(f"aa_check: bound failed: {reason}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
