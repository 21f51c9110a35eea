"""A/A and power of tlxdb's decisions on simulated noisy evidence (no GPU, no harness).

Each trial builds the events one evaluation would record: a candidate and the baseline measured
in one window (optimizer.evaluation.window: blocks of SAMPLES_PER_CALL samples per side and case,
in whole turns of the order, extra turns while a case is noisier than max_cv), and, where
`optimizer.decision.policy.owes_second_window` says the first window alone would promote, a
second window (remeasure_window) of the first window's instances of both beside new ones
(window.SECOND_WINDOW_INSTANCES of each: new samplers, so new instance effects), as the loop
does; then it asks the real `optimizer.decision.policy.decide`. Each trial is a run's first
second window: the estimate of how far instances run apart has only its controls. It counts,
per noise model:
- A/A: the candidate is the baseline. How often is it promoted (a false promotion), and how often
  does the 99% interval exclude 1.0 (nominally 1%)?
- power: the candidate is truly faster by a factor. How often is it promoted?

Noise models (times are multiplied by each factor that applies):
- lognormal: every sample independent, CV 5%.
- bimodal: one sample in three twice as slow (launch overhead on a small case), CV 3% besides.
- call effect: each harness call shifts its samples by a lognormal factor (CV 3%), the same for
  the samples of one call (a fresh input, another allocation).
- drift: each block multiplies both sides by a shared factor (CV 10%: the machine's load over
  seconds), plus a 2% call effect.
- bimodal + call: the bimodal model with a 5% call effect.
- every 4th call: in each window every fourth harness call of a case (both sides' calls counted)
  runs 10% slower, CV 1% besides: what the H200 showed on a 4096^3 fp16 GEMM after one warm-up
  call (the A/A run r20261204-082226-b3f0e6, kept in git at f3c04e3). tlxdb's order of then (A B,
  B A, A B ...) put that call on the candidate every time: a bias, no false promotion; its order
  of two members now (window.order: A B A B A B B A B A B A) spreads it over both. "random order"
  draws each turn's order at random instead: no bias, but intervals too narrow. Windows on a GPU
  also warm up past the swing first (optimizer.evaluation.window.GPU_WARM_UP_S).
- instance effect 1%, 2%: each instance of a kernel (a build loaded into the harness child) runs
  at its own speed for a whole window, a lognormal factor of CV 1% or 2% per side and window, CV
  1% besides: what an A/A call on the H200 showed on a launch-bound case (docs/GUARDS.md "A
  second window before a promotion"); the sizes are assumptions bracketing the H200's A/A
  speedups (0.983-1.022), not measurements of the factor. One window's blocks all share it, so
  no block bootstrap sees it; the second window's instances of one source measure it, and the
  interval carries it. "one window" decides on the first window alone, as the loop did before
  the second window.
- earlier process (the design before windows): the candidate measured in one call and compared
  with a baseline measured in another process: a process effect of CV 5% on each side. Shown
  only to say what the windows fix; it goes through the same statistic.

Usage: python benchmarks/noise_sim.py [--trials N] [--out DIR]
Writes DIR/noise_sim.json (the rates) and DIR/noise_sim.png (power curves, A/A bars).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from figures import save_png  # noqa: E402

from optimizer.decision import policy, stats  # noqa: E402
from optimizer.evaluation import window  # noqa: E402
from tlxstore.events import (  # noqa: E402
    BASELINE_ID,
    DEFAULT_THRESHOLDS,
    BenchmarkSampled,
    BuildFinished,
    CandidateProposed,
    CaseVerified,
    Envelope,
    Event,
    Phase,
    remeasure_window,
)
from tlxstore.fold import RunState, fold  # noqa: E402

REPETITIONS = DEFAULT_THRESHOLDS.benchmark_repetitions  # 10: 6 blocks of 2 beside the baseline
CASES = {"large": 100.0, "small": 10.0}  # true median times (us)
WEIGHTS = {c: 1.0 for c in CASES}
SPEEDUPS = [1.0, 1.02, 1.05, 1.1, 1.25, 1.5, 2.0, 3.0]

MODELS = {
    "lognormal": {"cv": 0.05},
    "bimodal": {"cv": 0.03, "slow_every": 3, "slow": 2.0, "cases": ["small"]},
    "call effect": {"cv": 0.01, "call": 0.03},
    "drift": {"cv": 0.02, "call": 0.02, "drift": 0.10},
    "bimodal + call": {"cv": 0.03, "slow_every": 3, "slow": 2.0, "call": 0.05, "cases": ["small"]},
    "every 4th call": {"cv": 0.01, "every_call": 4, "slow_call": 1.1},
    "every 4th call, random order": {
        "cv": 0.01,
        "every_call": 4,
        "slow_call": 1.1,
        "random_order": True,
    },
    "instance effect 1%": {"cv": 0.01, "instance": 0.01},
    "instance effect 2%": {"cv": 0.01, "instance": 0.02},
    "instance effect 2%, one window": {"cv": 0.01, "instance": 0.02, "one_window": True},
    "earlier process": {"cv": 0.02, "process": 0.05, "legacy": True},
}


def _sigma(cv: float) -> float:
    return math.sqrt(math.log(1 + cv * cv))


class _Sampler:
    """Samples of one side under one model."""

    def __init__(self, model: dict, rng: np.random.Generator, true_us: dict[str, float]):
        self.m, self.rng, self.true = model, rng, true_us
        self.process = math.exp(rng.normal(0, _sigma(model.get("process", 0.0))))
        self.process *= math.exp(rng.normal(0, _sigma(model.get("instance", 0.0))))

    def call(self, case: str, n: int, shared: float, nth: int = 1) -> list[float]:
        """`nth`: the call's number in its window for this case (from 1), both sides' calls
        counted."""
        m, rng = self.m, self.rng
        factor = self.process * shared * math.exp(rng.normal(0, _sigma(m.get("call", 0.0))))
        if m.get("every_call") and nth % m["every_call"] == 0:
            factor *= m["slow_call"]
        x = self.true[case] * factor * np.exp(rng.normal(0, _sigma(m["cv"]), n))
        if m.get("slow_every") and case in m.get("cases", CASES):
            slow = rng.random(n) < 1.0 / m["slow_every"]
            x = np.where(slow, x * m["slow"], x)
        return [float(v) for v in x]


def _proposed(cid: str) -> list[Event]:
    return [
        CandidateProposed(
            candidate_id=cid,
            parent_id=None if cid == BASELINE_ID else BASELINE_ID,
            round=0 if cid == BASELINE_ID else 1,
            provider="sim",
            hypothesis="h",
            source_hash=f"sha256:{cid}",
            normalized_hash=f"sha256:{cid}",
        ),
        BuildFinished(candidate_id=cid, success=True, duration_ms=1.0),
        *[CaseVerified(candidate_id=cid, case_id=c, passed=True, seed=1) for c in CASES],
    ]


def _window(
    model: dict,
    rng: np.random.Generator,
    speedup: float,
    window_id: str = "c001",
    first: list[tuple[str, _Sampler]] | None = None,
) -> tuple[list[Event], list[tuple[str, _Sampler]]]:
    """The samples of one window of new instances of both sides, with extra blocks for noisy
    cases as the evaluator adds them, and those instances. `first`: the first window's
    instances, measured beside new ones (instances 2, 3, ...: window.SECOND_WINDOW_INSTANCES in
    all) as the second window measures them."""

    def new() -> list[tuple[str, _Sampler]]:
        base = _Sampler(model, rng, CASES)
        cand = _Sampler(model, rng, {c: t / speedup for c, t in CASES.items()})
        return [("c001", cand), (BASELINE_ID, base)]

    own = first or new()
    members = [(cid, side, 1) for cid, side in own]
    for instance in range(2, window.SECOND_WINDOW_INSTANCES + 1 if first else 2):
        members += [(cid, side, instance) for cid, side in new()]
    events: list[Event] = []
    seen: dict[str, dict[str, list[float]]] = {f"{m}.{i}": {} for m, _, i in members}
    drift_sigma = _sigma(model.get("drift", 0.0))
    calls: dict[str, int] = {}
    flip = False

    size, blocks = window.per_call(REPETITIONS), window.first_blocks(REPETITIONS, len(members))

    def block(index: int, n: int, cases: list[str]) -> None:
        nonlocal flip
        shared = math.exp(rng.normal(0, drift_sigma))
        if model.get("random_order") and index % 2 == 0:
            flip = rng.random() < 0.5  # this turn of two blocks: B A, A B
        for case in cases:
            ordered = window.order(members, index, blocks)
            if flip:
                ordered = ordered[::-1]
            for cid, side, instance in ordered:
                calls[case] = calls.get(case, 0) + 1
                got = side.call(case, n, shared, calls[case])
                seen[f"{cid}.{instance}"].setdefault(case, []).extend(got)
                events.append(
                    BenchmarkSampled(
                        candidate_id=cid,
                        case_id=case,
                        block=index,
                        window_id=window_id,
                        instance=instance,
                        samples_us=got,
                    )
                )

    for i in range(blocks):
        block(i, size, list(CASES))
    t = DEFAULT_THRESHOLDS
    index = blocks
    for _ in range(window.extra_turns(t.max_extra_blocks, len(members))):
        noisy = window.noisy_cases(seen, list(CASES), t.max_cv)
        if not noisy:
            break
        for _ in members:
            block(index, size, noisy)
            index += 1
    return events, own


def _legacy(model: dict, rng: np.random.Generator, speedup: float) -> list[Event]:
    """The design before windows: the baseline in validation (its own process), the candidate
    alone in its own, one call each."""
    base = _Sampler(model, rng, CASES)
    cand = _Sampler(model, rng, {c: t / speedup for c, t in CASES.items()})
    out: list[Event] = []
    for cid, side, phase in ((BASELINE_ID, base, Phase.VALIDATION), ("c001", cand, Phase.ROUND)):
        for case in CASES:
            out.append(
                BenchmarkSampled(
                    candidate_id=cid,
                    case_id=case,
                    phase=phase,
                    samples_us=side.call(case, REPETITIONS, 1.0),
                )
            )
    return out


def _state(events: list[Event]) -> RunState:
    now = datetime.now(UTC)
    return fold(
        Envelope(event_id=f"e{i}", run_id="sim", seq=i, recorded_at=now, event=e)
        for i, e in enumerate(events)
    )


def trial(model: dict, rng: np.random.Generator, speedup: float) -> tuple[bool, bool, float]:
    """(promoted, the 99% interval excludes 1.0, the speedup decided) of one decision."""
    if model.get("legacy"):
        measured, first = _legacy(model, rng, speedup), []
    else:
        measured, first = _window(model, rng, speedup)
    events = _proposed(BASELINE_ID) + _proposed("c001") + measured
    state = _state(events)
    if not (model.get("legacy") or model.get("one_window")) and policy.owes_second_window(
        state, "c001", DEFAULT_THRESHOLDS, WEIGHTS
    ):
        again, _ = _window(model, rng, speedup, remeasure_window("c001"), first)
        state = _state(events + again)
    d = policy.decide(state, "c001", DEFAULT_THRESHOLDS, WEIGHTS)
    assert d.ci_low is not None and d.ci_high is not None, d.reason
    assert d.speedup is not None
    return d.outcome.value == "promoted", not (d.ci_low <= 1.0 <= d.ci_high), d.speedup


def rates(model: dict, speedup: float, trials: int, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    promoted = excluded = 0
    decided: list[float] = []
    for _ in range(trials):
        p, e, s = trial(model, rng, speedup)
        promoted += p
        excluded += e
        decided.append(s / speedup)
    return {
        "promoted": promoted / trials,
        "ci_excludes_1": excluded / trials,
        "median_bias": float(np.median(decided)),  # the decided speedup / the true one
    }


def _figure(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for name, r in results["models"].items():
        xs = [float(s) - 1.0 for s in r["power"]]  # the gain, on a log axis: 2% to 200%
        left.plot(xs, [r["power"][s]["promoted"] for s in r["power"]], marker="o", label=name)
    left.set_xscale("log")
    left.set_xticks([s - 1.0 for s in SPEEDUPS[1:]])
    left.set_xticklabels([f"{s:g}x" for s in SPEEDUPS[1:]])
    left.minorticks_off()
    left.set_xlabel("true speedup (log scale of the gain)")
    left.set_ylabel("promoted")
    left.set_title(f"power ({results['power_trials']} trials per point)")
    left.legend(fontsize=8)
    names = list(results["models"])
    aa = [results["models"][n]["aa"]["ci_excludes_1"] for n in names]
    fp = [results["models"][n]["aa"]["promoted"] for n in names]
    x = np.arange(len(names))
    right.bar(x - 0.2, aa, 0.4, label="99% CI excludes 1.0")
    right.bar(x + 0.2, fp, 0.4, label="promoted")
    right.axhline(0.01, color="k", lw=0.8, ls="--", label="1%")
    right.set_xticks(x)
    right.set_xticklabels(names, rotation=20, fontsize=8)
    right.set_yscale("symlog", linthresh=0.01)
    right.set_title(f"A/A ({results['aa_trials']} decisions per model)")
    right.legend(fontsize=8)
    fig.tight_layout()
    save_png(fig, path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=1000, help="A/A decisions per model")
    ap.add_argument("--power-trials", type=int, default=300, help="decisions per power point")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/noise_sim"))
    ap.add_argument("--replot", action="store_true", help="redraw the figure from DIR's JSON")
    args = ap.parse_args()
    if args.replot:
        _figure(json.loads((args.out / "noise_sim.json").read_text()), args.out / "noise_sim.png")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    results: dict = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "repetitions": REPETITIONS,
        "blocks": window.first_blocks(REPETITIONS, 2),
        "samples_per_call": window.per_call(REPETITIONS),
        "thresholds": DEFAULT_THRESHOLDS.model_dump(),
        "confidence": stats.DEFAULT_CONFIDENCE,
        "aa_trials": args.trials,
        "power_trials": args.power_trials,
        "models": {},
    }
    for i, (name, model) in enumerate(MODELS.items()):
        aa = rates(model, 1.0, args.trials, seed=1000 + i)
        power = {
            f"{s:g}": rates(model, s, args.power_trials, seed=2000 + 10 * i + j)
            for j, s in enumerate(SPEEDUPS[1:])
        }
        results["models"][name] = {"model": model, "aa": aa, "power": power}
        print(
            f"{name:16s} A/A promoted {aa['promoted']:.2%}, CI excludes 1.0 "
            f"{aa['ci_excludes_1']:.2%}, median speedup {aa['median_bias']:.3f}; power "
            + " ".join(f"{s}:{p['promoted']:.2f}" for s, p in power.items()),
            flush=True,
        )
    results["seconds"] = round(time.monotonic() - t0, 1)
    (args.out / "noise_sim.json").write_text(json.dumps(results, indent=1) + "\n")
    _figure(results, args.out / "noise_sim.png")
    print(f"wrote {args.out}/noise_sim.json and noise_sim.png in {results['seconds']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
