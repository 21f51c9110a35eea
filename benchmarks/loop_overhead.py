"""tlxdb's own time per candidate: everything the loop does besides evaluating (harness child
processes) and proposing (the provider).

Two measurements, both through the real library API (optimizer.run.lifecycle.optimize) with a real store:

1. `instant`: a harness that returns instantly (build compiles the source, verify says yes,
   benchmark returns constant samples) and a provider that proposes a new knob value each time,
   ROUNDS x PER_ROUND candidates. The loop's time per candidate is the wall time of the loop
   (from BundleValidated to RunFinished) minus the time inside Evaluator.evaluate/revalidate and
   the provider, divided by the candidates. Target: <= 50 ms per candidate.
2. `typical`: the vecadd fixture bundle (a real Triton kernel on the interpreter) with 2 rounds x 2
   candidates; the same overhead as a share of the loop's wall time. Target: <= 2%.

The evaluator's own cost with an instant harness (mostly starting a Python child that imports
torch) is reported separately: it is per-evaluation process isolation, not loop bookkeeping.

usage: python benchmarks/loop_overhead.py [--out benchmarks/results/loop_overhead.json]
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
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import optimizer.run.loop as loop_module  # noqa: E402
from optimizer.bundle.loading import locate  # noqa: E402
from optimizer.decision import policy  # noqa: E402
from optimizer.evaluation.evaluator import Evaluator  # noqa: E402
from optimizer.providers.base import Proposal, ProviderContext, Recorder, SearchExhausted  # noqa: E402
from optimizer.run import lifecycle  # noqa: E402
from optimizer.run.folder import OutputFolder  # noqa: E402
from queries import lookups  # noqa: E402
from tlxstore.events import BundleValidated, Envelope, RunFinished  # noqa: E402
from tlxstore.fold import RunState  # noqa: E402
from tlxstore.runlog import RunLog  # noqa: E402
from tlxstore.store import Store  # noqa: E402

ROUNDS, PER_ROUND = 5, 4

INSTANT_HARNESS = """
def build(kernel_source, target):
    compile(kernel_source, "kernel.py", "exec")
    return {"ok": True}


def verify(artifact, case):
    return True


def benchmark(artifact, case, repetitions):
    return [10.0] * repetitions
"""
INSTANT_KERNEL = "BLOCK = 1\n\n\ndef kernel(x):\n    return x * BLOCK\n"


@dataclass
class Timers:
    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    calls: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - t0
                self.calls[name] += 1

        return timed


@dataclass
class KnobProvider:
    """Proposes BLOCK = 2, 3, 4, ... on the parent (a real Provider)."""

    limit: int
    name: str = "bench"
    model: str | None = None
    seconds: float = 0.0

    def propose(self, ctx: ProviderContext, record: Recorder) -> Proposal | SearchExhausted:
        t0 = time.perf_counter()
        n = len([m for m in ctx.measured if m.run_id == ctx.run_id]) + 2
        out: Proposal | SearchExhausted
        if n - 2 >= self.limit:
            out = SearchExhausted(reason="done")
        else:
            src = "\n".join(
                f"BLOCK = {n}" if ln.startswith("BLOCK = ") else ln
                for ln in ctx.parent_source.split("\n")
            )
            out = Proposal(
                source=src, hypothesis=f"BLOCK {n}", change=f"BLOCK={n}", knobs={"BLOCK": n}
            )
        self.seconds += time.perf_counter() - t0
        return out


def _instrument(timers: Timers) -> None:
    Evaluator.evaluate = timers.wrap("evaluate", Evaluator.evaluate)  # type: ignore[method-assign]
    Evaluator.revalidate = timers.wrap("revalidate", Evaluator.revalidate)  # type: ignore[method-assign]
    Store.ingest = timers.wrap("store.ingest", Store.ingest)  # type: ignore[method-assign]
    lookups.find_measured = timers.wrap("lookups.find_measured", lookups.find_measured)
    loop_module.build_context = timers.wrap("build_context", loop_module.build_context)
    policy.decide = timers.wrap("policy.decide", policy.decide)
    policy.decide_revalidation = timers.wrap(
        "policy.decide_revalidation", policy.decide_revalidation
    )
    RunLog.append = timers.wrap("runlog.append (fsync)", RunLog.append)  # type: ignore[method-assign]
    OutputFolder.write_experiment = timers.wrap(
        "output.write_experiment", OutputFolder.write_experiment
    )  # type: ignore[method-assign]


def _measure(
    req: lifecycle.RunRequest, provider: KnobProvider | Any, timers: Timers
) -> dict[str, Any]:
    marks: dict[str, float] = {}

    def observer(env: Envelope, state: RunState) -> None:
        if isinstance(env.event, BundleValidated):
            marks["validated"] = time.perf_counter()
            timers.seconds.clear()
            timers.calls.clear()
        if isinstance(env.event, RunFinished):
            marks["finished"] = time.perf_counter()

    t0 = time.perf_counter()
    result = lifecycle.optimize(req, provider=provider, observer=observer)
    total = time.perf_counter() - t0
    loop_s = marks["finished"] - marks["validated"]
    evaluator_s = timers.seconds["evaluate"] + timers.seconds["revalidate"]
    provider_s = getattr(provider, "seconds", 0.0) + timers.seconds["provider.propose"]
    n = len(result.experiments)
    overhead_s = loop_s - evaluator_s - provider_s
    return {
        "candidates": n,
        "exit_code": result.exit_code,
        "wall_s": round(total, 3),
        "loop_wall_s": round(loop_s, 3),
        "evaluator_s": round(evaluator_s, 3),
        "provider_s": round(provider_s, 4),
        "overhead_s": round(overhead_s, 4),
        "overhead_ms_per_candidate": round(1000 * overhead_s / max(n, 1), 2),
        "overhead_share_of_loop_wall": round(overhead_s / loop_s, 4),
        "evaluator_ms_per_evaluation": round(
            1000 * evaluator_s / max(timers.calls["evaluate"] + timers.calls["revalidate"], 1), 1
        ),
        "parts_ms_per_candidate": {
            k: round(1000 * v / max(n, 1), 2)
            for k, v in timers.seconds.items()
            if k not in ("evaluate", "revalidate")
        },
    }


def instant(tmp: Path, timers: Timers) -> dict[str, Any]:
    bundle = tmp / "instant"
    bundle.mkdir()
    (bundle / "harness.py").write_text(INSTANT_HARNESS)
    (bundle / "cases.json").write_text(
        json.dumps([{"case_id": "a"}, {"case_id": "b", "weight": 2}])
    )
    (bundle / "target.json").write_text(json.dumps({"backend": "cpu"}))
    kernel = tmp / "instant_kernel.py"
    kernel.write_text(INSTANT_KERNEL)
    req = lifecycle.RunRequest(
        kernel=kernel,
        bundle=locate(bundle),
        store=tmp / "store.duckdb",
        output_dir=tmp / "out-instant",
        flags={
            "max_rounds": ROUNDS,
            "candidates_per_round": PER_ROUND,
            "benchmark_repetitions": 10,
        },
        commit=lifecycle.CommitOptions(enabled=False),
    )
    return _measure(req, KnobProvider(limit=ROUNDS * PER_ROUND), timers)


def typical(
    tmp: Path, timers: Timers, bundle_dir: Path | None, kernel: Path | None
) -> dict[str, Any]:
    """vecadd on the interpreter with a scripted provider, or a given bundle with the tune provider."""
    flags = {"max_rounds": 2, "candidates_per_round": 2}
    if bundle_dir is None:
        sys.path.insert(0, str(REPO / "tests" / "optimizer"))
        from bundles import kernel_copy, vecadd_bundle
        from scripted_provider import ScriptedProvider, set_block

        bundle, kernel = vecadd_bundle(tmp / "vecadd"), kernel_copy(tmp / "src")
        flags.update(benchmark_repetitions=10, max_cv=5.0)
        provider: Any = ScriptedProvider(
            [set_block(128), set_block(256), set_block(512), set_block(1024)]
        )
    else:
        bundle = Path(shutil.copytree(bundle_dir, tmp / "bundle"))
        budget = bundle / "budget.json"
        if budget.exists():  # the run's size is this benchmark's, not the example's
            kept = {k: v for k, v in json.loads(budget.read_text()).items() if k not in flags}
            budget.write_text(json.dumps(kept))
        kernel = Path(shutil.copy(kernel, tmp / Path(kernel).name))  # type: ignore[arg-type]
        from optimizer.providers import tune

        tune.TuneProvider.propose = timers.wrap("provider.propose", tune.TuneProvider.propose)  # type: ignore[method-assign]
        provider = None  # the default: tune
    req = lifecycle.RunRequest(
        kernel=kernel,
        bundle=locate(bundle),
        store=tmp / "store.duckdb",
        output_dir=tmp / "out-typical",
        flags=flags,
        commit=lifecycle.CommitOptions(enabled=False),
    )
    return _measure(req, provider, timers)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--out", type=Path, default=REPO / "benchmarks" / "results" / "loop_overhead.json"
    )
    ap.add_argument(
        "--typical-bundle", type=Path, help="a bundle for the typical run (default: vecadd)"
    )
    ap.add_argument("--typical-kernel", type=Path)
    ap.add_argument("--skip-instant", action="store_true")
    args = ap.parse_args()
    timers = Timers()
    _instrument(timers)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        inst = None if args.skip_instant else instant(tmp, timers)
        typ = typical(tmp, timers, args.typical_bundle, args.typical_kernel)
    typ["bundle"] = str(
        args.typical_bundle or "tests/fixtures/vecadd_bundle on the Triton interpreter"
    )
    results = {
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
        },
        "versions": lifecycle.tool_versions().model_dump(),
        "instant": inst,
        "typical": typ,
        "targets": {
            "overhead_ms_per_candidate<=50": None
            if inst is None
            else inst["overhead_ms_per_candidate"] <= 50,
            "overhead_share_of_typical_run<=0.02": typ["overhead_share_of_loop_wall"] <= 0.02,
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
