"""The decision policy, on run states folded from real events.

The simulation tests are the evidence that the statistics are sound: thousands of decisions by the
real `decide` on synthetic noisy samples with fixed seeds.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

import numpy as np
import pytest

from optimizer import units
from optimizer.decision import policy, pooling, stats
from tlxstore.events import (
    BenchmarkSampled,
    BuildFinished,
    CandidateProposed,
    CaseVerified,
    DecisionMade,
    DeviceEvaluated,
    DevicesAssigned,
    Envelope,
    Event,
    FailureKind,
    InfrastructureFailed,
    IntegrityFlagged,
    Outcome,
    Phase,
    Thresholds,
    remeasure_window,
)
from tlxstore.fold import RunState, fold

T = Thresholds(
    max_rounds=5,
    candidates_per_round=2,
    max_candidate_seconds=600,
    max_total_seconds=3600,
    min_speedup=1.01,
    max_cv=0.10,
    benchmark_repetitions=10,  # the default
)
REPS = T.benchmark_repetitions


def build_state(events: list[Event]) -> RunState:
    now = datetime.now(UTC)
    return fold(
        Envelope(event_id=f"e{i}", run_id="r1", seq=i, recorded_at=now, event=e)
        for i, e in enumerate(events)
    )


def measured(
    cid: str,
    samples: dict[str, list[float]],
    phase: Phase = Phase.ROUND,
    block: int = 0,
    proposed: bool = True,
    verified: dict[str, bool] | None = None,
) -> list[Event]:
    out: list[Event] = []
    if proposed:
        out.append(
            CandidateProposed(
                candidate_id=cid,
                parent_id=None if cid == "baseline" else "baseline",
                round=0 if cid == "baseline" else 1,
                provider="test",
                hypothesis="h",
                source_hash=f"sha256:{cid}",
                normalized_hash=f"sha256:{cid}",
            )
        )
        out.append(BuildFinished(candidate_id=cid, success=True, duration_ms=1.0))
    for case, s in samples.items():
        ok = (verified or {}).get(case, True)
        out.append(CaseVerified(candidate_id=cid, case_id=case, passed=ok, phase=phase, seed=7))
        if ok:
            out.append(
                BenchmarkSampled(
                    candidate_id=cid, case_id=case, phase=phase, block=block, samples_us=list(s)
                )
            )
    return out


def in_window(
    window: str,
    sides: dict[str, dict[str, list[float]]],
    *,
    per_block: int = 2,
    phase: Phase = Phase.ROUND,
) -> list[Event]:
    """The events of one measurement window: each member's samples of each case (sides[member])
    taken `per_block` at a time, block by block, the members' order turning each block, as
    optimizer.evaluation.pipeline measures them. A member "c001.2" is the second instance of
    c001 (its source built again, as the evaluator keys it)."""
    out: list[Event] = []
    members = list(sides)
    cases = list(next(iter(sides.values())))
    blocks = max(len(sides[m][c]) for m in members for c in cases) // per_block
    for b in range(blocks):
        order = members[b % len(members) :] + members[: b % len(members)]
        for case in cases:
            for member in order:
                chunk = sides[member][case][b * per_block : (b + 1) * per_block]
                cid, _, instance = member.partition(".")
                if chunk:
                    out.append(
                        BenchmarkSampled(
                            candidate_id=cid,
                            case_id=case,
                            phase=phase,
                            block=b,
                            window_id=window,
                            instance=int(instance or 1),
                            samples_us=chunk,
                        )
                    )
    return out


def proposed(cid: str, cases: list[str]) -> list[Event]:
    """A candidate proposed, built and verified on every case, not yet benchmarked."""
    return [
        e for e in measured(cid, {c: [1.0] for c in cases}) if not isinstance(e, BenchmarkSampled)
    ]


def noisy(rng: np.random.Generator, median_us: float, cv: float, n: int = REPS) -> list[float]:
    """Log-normal timing noise with the given coefficient of variation."""
    sigma = math.sqrt(math.log(1 + cv * cv))
    return list(median_us * np.exp(rng.normal(0.0, sigma, n)))


def promotion_rate(cases: int, cv: float, true_speedup: float, trials: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    weights = {f"case{i}": 1.0 for i in range(cases)}
    promoted = 0
    for _ in range(trials):
        base = {c: noisy(rng, 100.0 * (i + 1), cv) for i, c in enumerate(weights)}
        cand = {c: noisy(rng, 100.0 * (i + 1) / true_speedup, cv) for i, c in enumerate(weights)}
        state = build_state(
            proposed("baseline", list(weights))
            + proposed("c001", list(weights))
            + in_window("c001", {"c001": cand, "baseline": base})
        )
        decision = policy.decide(state, "c001", T, weights)
        promoted += decision.outcome == Outcome.PROMOTED
    return promoted / trials


# A bundle with three cases (sizes), each measured with the default 10 repetitions: 5 blocks of 2
# in the candidate's window, beside the baseline.
SIM_CASES = 3
SIM_TRIALS = 1500


def test_an_aa_comparison_at_5_percent_cv_is_promoted_in_at_most_1_percent(capsys):
    rate = promotion_rate(SIM_CASES, cv=0.05, true_speedup=1.0, trials=SIM_TRIALS, seed=11)
    with capsys.disabled():
        print(
            f"\nA/A at 5% CV, {SIM_CASES} cases x {REPS} reps: promoted {rate:.2%} of {SIM_TRIALS}"
        )
    assert rate <= 0.01


def test_a_true_3_percent_speedup_at_2_percent_cv_is_promoted_in_at_least_90_percent(capsys):
    rate = promotion_rate(SIM_CASES, cv=0.02, true_speedup=1.03, trials=SIM_TRIALS, seed=12)
    with capsys.disabled():
        print(
            f"\n3% speedup at 2% CV, {SIM_CASES} cases x {REPS} reps: promoted {rate:.2%} of {SIM_TRIALS}"
        )
    assert rate >= 0.90


def test_a_single_case_aa_comparison_at_5_percent_cv_is_promoted_in_at_most_1_percent():
    assert promotion_rate(1, cv=0.05, true_speedup=1.0, trials=1000, seed=13) <= 0.01


# ---- criteria, one at a time ------------------------------------------------------------------

BASE = {"small": [10.0, 10.1, 9.9, 10.0, 10.05], "large": [100.0, 101.0, 99.0, 100.5, 99.5]}
FAST = {k: [x / 1.2 for x in v] for k, v in BASE.items()}
W = {"small": 1.0, "large": 1.0}


def decide(events: list[Event], cid: str = "c001", **kw) -> DecisionMade:
    return policy.decide(build_state(events), cid, T, W, **kw)


def test_a_clear_speedup_is_promoted_with_its_interval_and_cases():
    d = decide(measured("baseline", BASE, Phase.VALIDATION) + measured("c001", FAST))
    assert d.outcome == Outcome.PROMOTED, d.reason
    assert d.speedup == pytest.approx(1.2)
    assert 1.0 < d.ci_low <= d.speedup <= d.ci_high
    assert [c.case_id for c in d.cases] == ["small", "large"]
    assert all(c.baseline_cv is not None and c.candidate_cv is not None for c in d.cases)
    assert d.compared_to == "baseline" and "speedup 1.2000x" in d.reason


def test_a_blocking_guard_rejects_whatever_the_numbers():
    events = measured("baseline", BASE, Phase.VALIDATION) + measured("c001", FAST)
    events.append(
        IntegrityFlagged(
            candidate_id="c001", guard="static:thread", detail="imports threading", blocking=True
        )
    )
    d = decide(events)
    assert d.outcome == Outcome.REJECTED
    assert d.reason == "integrity guard static:thread: imports threading"


def test_a_protected_case_that_failed_verification_fails_the_candidate():
    events = measured("baseline", BASE, Phase.VALIDATION) + measured(
        "c001", FAST, verified={"large": False}
    )
    d = decide(events)
    assert d.outcome == Outcome.FAILED
    assert d.reason.startswith("protected case large failed verification (attempt 1, seed 7)")


def test_an_unprotected_case_that_failed_is_left_out_of_the_score():
    slow_large = {"small": FAST["small"], "large": BASE["large"]}
    events = measured("baseline", BASE, Phase.VALIDATION) + measured(
        "c001", slow_large, verified={"large": False}
    )
    d = decide(events, protected=["small"])
    assert d.outcome == Outcome.PROMOTED, d.reason
    assert [c.case_id for c in d.cases] == ["small"]


def test_under_strict_noise_a_noisy_case_is_rejected_for_its_cv():
    noisy_fast = dict(FAST, small=[5.0, 9.0, 8.0, 12.0, 7.0])
    strict = T.model_copy(update={"strict_noise": True})
    state = build_state(measured("baseline", BASE, Phase.VALIDATION) + measured("c001", noisy_fast))
    d = policy.decide(state, "c001", strict, W)
    assert d.outcome == Outcome.REJECTED
    assert "case small CV" in d.reason and "above max 0.1" in d.reason


def test_a_speedup_below_min_speedup_is_rejected():
    slight = {k: [x / 1.005 for x in v] for k, v in BASE.items()}
    d = decide(measured("baseline", BASE, Phase.VALIDATION) + measured("c001", slight))
    assert d.outcome == Outcome.REJECTED and "below min 1.01" in d.reason


def test_a_point_estimate_above_min_whose_interval_reaches_1_is_rejected():
    rng = np.random.default_rng(4)
    base = {"small": noisy(rng, 100, 0.08)}
    cand = {"small": [x / 1.03 for x in noisy(rng, 100, 0.08)]}
    state = build_state(measured("baseline", base, Phase.VALIDATION) + measured("c001", cand))
    d = policy.decide(state, "c001", T, {"small": 1.0})
    assert d.outcome == Outcome.REJECTED
    assert d.ci_low is not None and d.ci_low <= 1.0 and "CI lower bound" in d.reason


def test_a_rejection_below_min_whose_interval_reaches_1_says_the_figure_once():
    rng = np.random.default_rng(5)
    base = {"small": noisy(rng, 100, 0.08)}
    cand = {"small": [x * 1.06 for x in noisy(rng, 100, 0.08)]}
    state = build_state(measured("baseline", base, Phase.VALIDATION) + measured("c001", cand))
    d = policy.decide(state, "c001", T, {"small": 1.0})
    assert d.outcome == Outcome.REJECTED and "below min 1.01" in d.reason
    assert d.ci_low is not None and d.ci_low <= 1.0 and "CI lower bound" in d.reason
    assert d.reason.count("99% CI") == 1, d.reason


def test_a_p95_regression_on_a_protected_case_is_rejected_despite_a_faster_median():
    tail = dict(FAST, large=[80.0] * 8 + [140.0, 150.0])
    t = T.model_copy(update={"max_cv": 1.0})
    state = build_state(measured("baseline", BASE, Phase.VALIDATION) + measured("c001", tail))
    d = policy.decide(state, "c001", t, W)
    assert d.outcome == Outcome.REJECTED
    assert "case large p95 regressed" in d.reason and "max 10%" in d.reason


def test_under_max_cv_0_and_strict_noise_only_constant_samples_can_be_promoted():
    zero = T.model_copy(update={"max_cv": 0.0, "strict_noise": True})
    base = {"small": [0.5] * REPS}
    const = {"small": [1 / 9] * REPS}  # float sums would leave a CV of 1.3e-16 here
    jitter = {"small": [1 / 9] * (REPS - 1) + [1 / 9 + 1e-9]}
    events = measured("baseline", base, Phase.VALIDATION)
    d = policy.decide(build_state(events + measured("c001", const)), "c001", zero, {"small": 1.0})
    assert d.outcome == Outcome.PROMOTED, d.reason
    d = policy.decide(build_state(events + measured("c002", jitter)), "c002", zero, {"small": 1.0})
    assert d.outcome == Outcome.REJECTED and "case small CV 0.000 above max 0" in d.reason


def test_a_candidate_must_beat_the_incumbent():
    events = measured("baseline", BASE, Phase.VALIDATION) + measured("c001", FAST)
    events.append(DecisionMade(candidate_id="c001", outcome=Outcome.PROMOTED, reason="r"))
    same = {k: [x * 1.001 for x in v] for k, v in FAST.items()}
    d = decide(events + measured("c002", same), cid="c002")
    assert d.outcome == Outcome.REJECTED
    assert d.compared_to == "c001" and "does not beat the incumbent c001" in d.reason
    faster = {k: [x / 1.1 for x in v] for k, v in FAST.items()}
    d = decide(events + measured("c003", faster), cid="c003")
    assert d.outcome == Outcome.PROMOTED and "beats incumbent c001" in d.reason


def _tripped(cid: str = "c001") -> IntegrityFlagged:
    return IntegrityFlagged(
        candidate_id=cid, guard="tripwire:speedup>10x", detail="case small: 20x", blocking=False
    )


def test_a_tripwire_without_a_second_measurement_is_never_promoted():
    events = measured("baseline", BASE, Phase.VALIDATION) + measured("c001", FAST) + [_tripped()]
    d = decide(events)
    assert d.outcome == Outcome.REJECTED and "first measurement alone" in d.reason


def test_a_tripwire_is_promoted_only_when_every_measurement_holds():
    first = measured("baseline", BASE, Phase.VALIDATION) + measured("c001", FAST) + [_tripped()]
    held = decide(first + measured("c001", FAST, block=1, proposed=False))
    assert held.outcome == Outcome.PROMOTED and "held on re-measurement" in held.reason
    fell = decide(first + measured("c001", BASE, block=1, proposed=False))
    assert fell.outcome == Outcome.REJECTED and fell.reason.startswith("measurement 2:")
    assert fell.speedup == pytest.approx(1.0)  # the worse measurement is the one reported


def test_a_harness_error_fails_and_a_timeout_fails_as_retryable():
    base = measured("baseline", BASE, Phase.VALIDATION)
    err = InfrastructureFailed(
        candidate_id="c001",
        stage="benchmark",
        kind=FailureKind.HARNESS_ERROR,
        retryable=False,
        diagnostics="case small: benchmark sample 0 is 0.0 us; samples must be positive",
    )
    d = decide(base + measured("c001", {}) + [err])
    assert d.outcome == Outcome.FAILED and d.reason.startswith("harness error during benchmark")
    tmo = err.model_copy(
        update={"kind": FailureKind.TIMEOUT, "retryable": True, "diagnostics": "x"}
    )
    d = decide(base + measured("c001", {}) + [tmo])
    assert d.outcome == Outcome.FAILED and "timeout during benchmark (retryable)" in d.reason


def test_a_failed_build_fails_with_its_diagnostics():
    events = measured("baseline", BASE, Phase.VALIDATION) + measured("c001", {})
    events[-1] = BuildFinished(
        candidate_id="c001", success=False, duration_ms=1, diagnostics="Traceback\nSyntaxError: x"
    )
    d = decide(events)
    assert d.outcome == Outcome.FAILED and d.reason == "build failed: SyntaxError: x"


# ---- final revalidation -------------------------------------------------------------------------


def interleaved(fin: dict, base: dict, blocks: int) -> list[Event]:
    out: list[Event] = []
    for b in range(blocks):
        out += measured("c001", fin, Phase.REVALIDATION, block=b, proposed=False)
        out += measured("baseline", base, Phase.REVALIDATION, block=b, proposed=False)
    return out


def test_revalidation_uses_only_the_fresh_interleaved_samples():
    # Round 0's baseline was slow (the machine was busy); the fresh baseline is as fast as the
    # finalist, so the stale 20% "win" does not survive.
    stale = measured(
        "baseline", {k: [x * 1.2 for x in v] for k, v in BASE.items()}, Phase.VALIDATION
    )
    events = stale + measured("c001", BASE) + interleaved(BASE, BASE, 3)
    r = policy.decide_revalidation(build_state(events), "c001", "baseline", T, W)
    assert not r.survived and r.alternations == 3
    assert r.speedup == pytest.approx(1.0) and "below min" in r.reason


def test_a_real_win_survives_revalidation_with_its_interval():
    events = measured("baseline", BASE, Phase.VALIDATION) + measured("c001", FAST)
    events += interleaved(FAST, BASE, 3)
    r = policy.decide_revalidation(build_state(events), "c001", "baseline", T, W)
    assert r.survived, r.reason
    assert r.speedup == pytest.approx(1.2) and r.ci_low > 1.0 and r.alternations == 3
    assert "3 interleaved alternations" in r.reason


def test_revalidation_needs_three_alternations():
    events = measured("baseline", BASE, Phase.VALIDATION) + measured("c001", FAST)
    events += interleaved(FAST, BASE, 2)
    r = policy.decide_revalidation(build_state(events), "c001", "baseline", T, W)
    assert not r.survived and "at least 3" in r.reason


# ---- parallel runs: a candidate is compared with the baseline measured on its own device ----

W1 = {"n": 1.0}
NOW = datetime.now(UTC)


def _flat(us: float) -> dict[str, list[float]]:
    return {"n": [us * (1.0 + 0.002 * (i % 5)) for i in range(10)]}


def _on(device: str, events: list[Event]) -> list[Event]:
    """Evidence as a parallel run appends it, after the proposal: opened by DeviceEvaluated,
    which counts it."""
    proposal = [e for e in events if isinstance(e, CandidateProposed)]
    evidence = [e for e in events if not isinstance(e, CandidateProposed)]
    head = DeviceEvaluated(
        candidate_id=evidence[0].candidate_id,  # type: ignore[attr-defined]
        device=device,
        started_at=NOW,
        finished_at=NOW,
        events=len(evidence),
    )
    return [*proposal, head, *evidence]


def _run(*parts: list[Event]) -> RunState:
    devices = DevicesAssigned(devices=["0", "1"], pin_variable="CUDA_VISIBLE_DEVICES")
    baseline_on_0 = measured("baseline", _flat(100.0), phase=Phase.VALIDATION)
    return build_state([devices, *baseline_on_0, *[e for p in parts for e in p]])


def test_a_candidate_is_compared_with_the_baseline_of_its_own_device():
    # device 1 is twice as slow: 200 us for the baseline, 180 us for the candidate there
    state = _run(
        _on("1", measured("baseline", _flat(200.0), proposed=False)),
        _on("1", measured("c001", _flat(180.0))),
    )
    assert state.candidates["c001"].device == "1"
    d = policy.decide(state, "c001", T, W1)
    assert d.outcome == Outcome.PROMOTED, d.reason
    assert abs(d.speedup - 200.0 / 180.0) < 1e-9  # against device 0's baseline it would be 0.56


def test_an_incumbent_of_another_device_is_rescaled_by_the_two_baselines():
    # c001 on device 0: 80 us (1.25x); c002 on device 1: 150 us against a 200 us baseline (1.33x)
    state = _run(
        _on("1", measured("baseline", _flat(200.0), proposed=False)),
        _on("0", measured("c001", _flat(80.0))),
    )
    state = _append(state, policy.decide(state, "c001", T, W1))
    assert state.candidates["c001"].decision.outcome == Outcome.PROMOTED
    state = _append(state, *_on("1", measured("c002", _flat(150.0))))
    d = policy.decide(state, "c002", T, W1)
    # c001's 80 us on device 0 is 160 us on device 1: c002's 150 us beats it
    assert d.outcome == Outcome.PROMOTED and d.compared_to == "c001", d.reason
    slower = _append(state, *_on("1", measured("c003", _flat(170.0))))
    d3 = policy.decide(slower, "c003", T, W1)
    assert d3.outcome == Outcome.REJECTED
    assert "rescaled to device 1 by their baselines" in d3.reason


def test_a_run_without_devices_compares_every_sample_as_before():
    state = build_state(
        measured("baseline", _flat(100.0), phase=Phase.VALIDATION) + measured("c001", _flat(80.0))
    )
    assert state.primary_device is None and state.candidates["c001"].device is None
    assert abs(policy.decide(state, "c001", T, W1).speedup - 1.25) < 1e-9


def _append(state: RunState, *events: Event) -> RunState:
    for e in events:
        state.apply(
            Envelope(
                event_id=f"x{state.last_seq + 1}",
                run_id="r1",
                seq=state.last_seq + 1,
                recorded_at=NOW,
                event=e,
            )
        )
    return state


# ---- measurement windows: the candidate beside its references --------------------------------


def _windowed(cid: str, sides: dict[str, dict[str, list[float]]], **kw) -> list[Event]:
    return proposed(cid, list(W)) + in_window(cid, sides, **kw)


def _stale_baseline() -> list[Event]:
    """The baseline's validation, measured while the machine was 30% slower."""
    return measured(
        "baseline", {k: [x * 1.3 for x in v] for k, v in BASE.items()}, Phase.VALIDATION
    )


def test_a_windowed_candidate_is_compared_with_the_baseline_of_its_window_only():
    # against the stale validation samples it would read 1.3x; beside the baseline, 1.0x
    same = {k: [x * 1.0005 for x in v] for k, v in BASE.items()}
    events = _stale_baseline() + _windowed("c001", {"c001": same, "baseline": BASE}, per_block=1)
    d = decide(events)
    assert d.outcome == Outcome.REJECTED and d.speedup == pytest.approx(1 / 1.0005)
    assert d.measured is True and d.notes == []


def test_a_noisy_case_does_not_block_a_win_whose_whole_interval_is_above_min_speedup():
    base = {"small": [10.0, 10.1, 20.0, 9.9, 10.0, 20.2] * 2, "large": BASE["large"] * 2}
    fast = {"small": [4.0, 8.1, 4.1, 4.0, 8.0, 4.05] * 2, "large": FAST["large"] * 2}
    d = decide(_stale_baseline() + _windowed("c001", {"c001": fast, "baseline": base}))
    assert d.outcome == Outcome.PROMOTED, d.reason
    assert d.ci_low > T.min_speedup
    assert len(d.notes) == 1 and d.notes[0].startswith("case small CV ")
    assert "above max 0.1 over 12 samples: decided on the interval" in d.notes[0]
    strict = T.model_copy(update={"strict_noise": True})
    state = build_state(_stale_baseline() + _windowed("c001", {"c001": fast, "baseline": base}))
    refused = policy.decide(state, "c001", strict, W)
    assert refused.outcome == Outcome.REJECTED and "case small CV" in refused.reason
    assert refused.notes == []


def test_a_noisy_case_needs_the_interval_above_min_speedup_not_only_above_1():
    rng = np.random.default_rng(0)
    base = {"small": noisy(rng, 100.0, 0.15, 60)}
    cand = {"small": noisy(rng, 100.0 / 1.2, 0.15, 60)}  # 1.19x, 99% CI 1.04-1.35, CV 0.150
    state = build_state(
        proposed("baseline", ["small"])
        + proposed("c001", ["small"])
        + in_window("c001", {"c001": cand, "baseline": base})
    )
    t = T.model_copy(update={"min_speedup": 1.1})
    d = policy.decide(state, "c001", t, {"small": 1.0})
    assert d.speedup > 1.1 and 1.0 < d.ci_low < 1.1
    assert d.outcome == Outcome.REJECTED
    assert "not above min 1.1, as a case noisier than max CV 0.1 needs" in d.reason
    quiet = policy.decide(state, "c001", t.model_copy(update={"max_cv": 0.2}), {"small": 1.0})
    assert quiet.outcome == Outcome.PROMOTED, quiet.reason


def test_an_incumbent_in_the_window_must_be_beaten_there():
    c001 = _windowed("c001", {"c001": FAST, "baseline": BASE})
    events = _stale_baseline() + c001
    first = decide(events)
    assert first.outcome == Outcome.PROMOTED
    events.append(first)
    same = {k: [x * 1.001 for x in v] for k, v in FAST.items()}
    c002 = _windowed("c002", {"c002": same, "baseline": BASE, "c001": FAST})
    d = decide(events + c002, cid="c002")
    assert d.outcome == Outcome.REJECTED and "does not beat the incumbent c001" in d.reason
    faster = {k: [x / 1.1 for x in v] for k, v in FAST.items()}
    c003 = _windowed("c003", {"c003": faster, "baseline": BASE, "c001": FAST})
    d3 = decide(events + c003, cid="c003")
    assert d3.outcome == Outcome.PROMOTED and "beats incumbent c001" in d3.reason


def test_an_incumbent_promoted_while_the_candidate_was_measured_is_beaten_by_its_interval():
    """A parallel round: c002's window was opened before c001 was promoted, so c001 is not in
    it; c002's interval over the baseline must then lie above c001's decided speedup."""
    c001 = _windowed("c001", {"c001": FAST, "baseline": BASE})
    little = {k: [x / 1.05 for x in v] for k, v in BASE.items()}
    c002 = _windowed("c002", {"c002": little, "baseline": BASE})
    events = _stale_baseline() + c001 + c002
    events.append(decide(events))
    d = decide(events, cid="c002")
    assert d.outcome == Outcome.REJECTED
    assert "promoted while it was measured" in d.reason and "c001's 1.2000x" in d.reason


def test_a_tripwire_needs_both_windows_to_hold():
    first = _stale_baseline() + _windowed("c001", {"c001": FAST, "baseline": BASE}) + [_tripped()]
    assert decide(first).outcome == Outcome.REJECTED
    again = in_window("c001.remeasure", {"c001": FAST, "baseline": BASE})
    held = decide(first + again)
    assert held.outcome == Outcome.PROMOTED and "held on re-measurement" in held.reason
    fell = decide(first + in_window("c001.remeasure", {"c001": BASE, "baseline": BASE}))
    assert fell.outcome == Outcome.REJECTED and fell.reason.startswith("measurement 2:")


def test_each_finalist_is_revalidated_from_its_own_window():
    """The winner chain revalidates c002, then c001: each revalidation reads its own window's
    baseline, not the other's."""
    events = _stale_baseline() + _windowed("c001", {"c001": FAST, "baseline": BASE})
    events += proposed("c002", list(W))
    events += in_window(
        "c002", {"c002": BASE, "baseline": BASE}, phase=Phase.REVALIDATION, per_block=1
    )
    slow_base = {k: [x * 1.5 for x in v] for k, v in BASE.items()}  # c001's window: slower machine
    events += in_window(
        "c001",
        {"c001": {k: [x * 1.5 for x in v] for k, v in FAST.items()}, "baseline": slow_base},
        phase=Phase.REVALIDATION,
        per_block=1,
    )
    state = build_state(events)
    r2 = policy.decide_revalidation(state, "c002", "baseline", T, W)
    r1 = policy.decide_revalidation(state, "c001", "baseline", T, W)
    assert not r2.survived and r2.speedup == pytest.approx(1.0)
    assert r1.survived and r1.speedup == pytest.approx(1.2) and r1.alternations == 5


def test_a_gate_decision_records_whether_the_source_was_measured():
    base = measured("baseline", BASE, Phase.VALIDATION)
    tmo = InfrastructureFailed(
        candidate_id="c001", stage="benchmark", kind=FailureKind.TIMEOUT, retryable=True
    )
    assert decide(base + measured("c001", {}) + [tmo]).measured is False
    flag = IntegrityFlagged(candidate_id="c001", guard="static:x", detail="d", blocking=True)
    assert decide(base + measured("c001", FAST) + [flag]).measured is True


def test_a_candidate_is_re_decided_from_its_own_window_not_those_it_was_a_reference_in():
    """tlxdb replay re-decides c001 after c002's window measured it again (slower, as the
    incumbent): c001's decision is made from its own window only, as it was."""
    events = _stale_baseline() + _windowed("c001", {"c001": FAST, "baseline": BASE})
    first = decide(events)
    events.append(first)
    slow = {k: [x * 2 for x in v] for k, v in FAST.items()}
    events += _windowed("c002", {"c002": FAST, "baseline": BASE, "c001": slow})
    again = policy.decide(build_state(events), "c001", T, W)
    assert again.outcome == first.outcome and again.speedup == first.speedup


def test_a_win_in_one_window_is_owed_a_second_and_held_only_when_that_one_holds_too():
    """The H200's A/A: an instance of the kernel 4% faster in every block of one window and not
    in the next. A first window that would promote is owed a second. Here the second window
    measured only the new instances (as before events recorded instances: no control, nothing
    measured how far instances run apart): the new pair's speedup must clear min_speedup on its
    own, and the decision reports both pairs together."""
    fast = {k: [x / 1.04 for x in v] for k, v in BASE.items()}
    first = _stale_baseline() + _windowed("c001", {"c001": fast, "baseline": BASE})
    state = build_state(first)
    assert policy.owes_second_window(state, "c001", T, W)
    fell = first + in_window(remeasure_window("c001"), {"c001": BASE, "baseline": BASE})
    state = build_state(fell)
    assert not policy.owes_second_window(state, "c001", T, W)
    d = policy.decide(state, "c001", T, W)
    assert d.outcome == Outcome.REJECTED and d.reason.startswith("measurement 2:"), d.reason
    assert d.speedup == pytest.approx(math.sqrt(1.04))
    held = first + in_window(remeasure_window("c001"), {"c001": fast, "baseline": BASE})
    d = policy.decide(build_state(held), "c001", T, W)
    assert d.outcome == Outcome.PROMOTED and "held in a second window" in d.reason, d.reason


def _instance_gap(again: dict[str, dict[str, list[float]]]) -> list[Event]:
    """c001 4% faster than the baseline in its first window, and its second window: the first
    window's instances again (c001 and the baseline, as fast as there) beside `again`, the
    instances built again (c001.2, baseline.2, c001.3, baseline.3)."""
    fast = {k: [x / 1.04 for x in v] for k, v in BASE.items()}
    first = _stale_baseline() + _windowed("c001", {"c001": fast, "baseline": BASE}, per_block=1)
    return first + in_window(
        remeasure_window("c001"), {"c001": fast, "baseline": BASE, **again}, per_block=1
    )


def _scaled(factor: float) -> dict[str, list[float]]:
    return {k: [x * factor for x in v] for k, v in BASE.items()}


def test_a_gap_between_instances_is_not_a_win_where_controls_measured_it():
    """Issue 27: the first window's 1.04x belongs to its instances. Built again, c001 runs 1.5%
    and 2% faster than the baseline's new instances: the pair of its second builds reads 1.025x,
    which clears min_speedup as a replicate (the rule that promoted it before), but the three
    instances of each source in one window measure how far instances run apart (sigma_I 1.0%),
    and the interval over the three pairs of instances carries it: it reaches below 1.0, and
    the decision records the estimate."""
    again = {
        "c001.2": _scaled(1 / 1.015),
        "baseline.2": _scaled(1.01),
        "c001.3": _scaled(1 / 1.02),
        "baseline.3": BASE,
    }
    state = build_state(_instance_gap(again))
    second = policy.window_blocks(state, remeasure_window("c001"), Phase.ROUND, instance=2)
    pair = policy.paired(second["baseline"], second["c001"])
    assert stats.blocked_speedup(*pair, W) == pytest.approx(1.01 * 1.015)  # >= min_speedup
    instances = policy.instance_variance(state, "c001", W)
    c001 = np.log([1 / 1.04, 1 / 1.015, 1 / 1.02])
    baseline = np.log([1.0, 1.01, 1.0])
    expected = (np.var(c001, ddof=1) + np.var(baseline, ddof=1)) / 2  # one block a sample: no noise
    assert instances.df == 4 and instances.variance == pytest.approx(expected, rel=1e-6)
    d = policy.decide(state, "c001", T, W)
    assert d.outcome == Outcome.REJECTED and d.ci_low < 1.0, d.reason
    assert "CI lower bound" in d.reason
    assert d.speedup == pytest.approx((1.04 * 1.01 * 1.015 * 1.02) ** (1 / 3))  # three pairs
    sigma = f"sigma_I {math.sqrt(expected):.2%}"
    assert any(sigma in n and "df 4" in n for n in d.notes), d.notes
    assert d.instance_df == 4 and d.instance_sigma == pytest.approx(math.sqrt(expected), rel=1e-6)
    assert d.instance_pairs == pytest.approx([1.04, 1.01 * 1.015, 1.02])


def test_a_win_whose_instances_agree_is_promoted_over_every_pair():
    """The same second window where the instances built again run as the first ones: the
    controls measure no gap between instances (sigma_I 0), and a 4% win over the three pairs of
    instances is promoted, the notes saying what the interval carries."""
    fast = _scaled(1 / 1.04)
    again = {"c001.2": fast, "baseline.2": BASE, "c001.3": fast, "baseline.3": BASE}
    d = policy.decide(build_state(_instance_gap(again)), "c001", T, W)
    assert d.outcome == Outcome.PROMOTED and d.speedup == pytest.approx(1.04), d.reason
    assert any("sigma_I 0.00%" in n and "df 4" in n for n in d.notes), d.notes
    assert "over 3 pairs of instances of it and the baseline: 1.0400x, 1.0400x, 1.0400x" in d.notes
    assert (d.instance_df, d.instance_sigma) == (4, 0.0)
    assert d.instance_pairs == pytest.approx([1.04, 1.04, 1.04])


def test_a_window_that_would_not_promote_is_owed_nothing():
    same = {k: [x * 1.0005 for x in v] for k, v in BASE.items()}
    state = build_state(_stale_baseline() + _windowed("c001", {"c001": same, "baseline": BASE}))
    assert not policy.owes_second_window(state, "c001", T, W)


def test_a_decision_uses_the_controls_of_earlier_rounds_not_of_its_own_round():
    """c001's second window measured its instances (4 degrees of freedom). A candidate of a
    later round is decided on them, its first window's interval carrying them too; one of
    c001's own round is not (a parallel round's candidates are measured side by side, and each
    is decided on the same controls as in a serial run)."""
    again = {
        "c001.2": _scaled(1 / 1.015),
        "baseline.2": _scaled(1.01),
        "c001.3": _scaled(1 / 1.02),
        "baseline.3": BASE,
    }
    events = _instance_gap(again)
    later = [
        e.model_copy(update={"round": 2}) if isinstance(e, CandidateProposed) else e
        for e in proposed("c002", list(W))
    ]
    events += later + proposed("c003", list(W))
    state = build_state(events)
    assert policy.instance_variance(state, "c002", W).df == 4
    assert policy.instance_variance(state, "c003", W).df == 0


BIMODAL = [10.0, 10.1, 20.0, 9.9, 10.0, 20.2] * 2  # one sample in three twice as slow: CV 0.37


def test_a_noisy_protected_case_that_regressed_for_certain_blocks_promotion():
    """The p95 of a noisy case is not compared (its tail is its noise); its median is, on the
    case's own interval: a winner on the large case that made the protected noisy case 0.75x
    (a new user's run kept one at 0.782x with only a note) is refused."""
    rng = np.random.default_rng(3)
    base = {"small": noisy(rng, 100.0, 0.15, 24), "large": BASE["large"] * 2}
    slow = {"small": noisy(rng, 133.0, 0.15, 24), "large": [x / 3 for x in BASE["large"] * 2]}
    sides = {"c001": slow, "baseline": base}
    d = decide(proposed("baseline", list(W)) + _windowed("c001", sides))
    assert d.speedup > 1.4 and d.ci_low > T.min_speedup  # the geomean alone would promote it
    assert d.outcome == Outcome.REJECTED
    assert "protected case small regressed: 0.7" in d.reason, d.reason
    assert "wholly below 0.9091 (max 10% slower)" in d.reason
    unprotected = decide(
        proposed("baseline", list(W)) + _windowed("c001", sides), protected=["large"]
    )
    assert unprotected.outcome == Outcome.PROMOTED, unprotected.reason
    assert any("its p95 not compared" in n for n in unprotected.notes)


def test_a_bimodal_protected_case_that_reads_slower_is_named_in_a_note_not_refused():
    """Bimodal samples (a dozen a side) cannot tell a 0.8x median from a draw of the slow mode:
    the case's own interval reaches past 1. The large case's win is promoted, and the decision's
    note names the small case's slower median so that nobody reads the win as free."""
    base = {"small": BIMODAL, "large": BASE["large"] * 2}
    fast = {"small": [x * 1.25 for x in BIMODAL], "large": [x / 3 for x in BASE["large"] * 2]}
    d = decide(_stale_baseline() + _windowed("c001", {"c001": fast, "baseline": base}))
    assert d.outcome == Outcome.PROMOTED, d.reason
    (note,) = [n for n in d.notes if n.startswith("protected case small read 0.8000x")]
    assert "more than 10% slower at its median, but too noisy to tell" in note, note
    strict = T.model_copy(update={"strict_noise": True})
    state = build_state(_stale_baseline() + _windowed("c001", {"c001": fast, "baseline": base}))
    assert policy.decide(state, "c001", strict, W).outcome == Outcome.REJECTED


def _after_a_second_window(c002: dict[str, dict[str, list[float]]]) -> RunState:
    """c001 promoted at 1.04x over three pairs of agreeing instances (its second window: the
    run's instance estimate, 4 degrees of freedom), then c002 of round 2 measured in one window
    beside the baseline and c001 (`c002`: its members' samples)."""
    fast = _scaled(1 / 1.04)
    again = {"c001.2": fast, "baseline.2": BASE, "c001.3": fast, "baseline.3": BASE}
    events = _instance_gap(again)
    events.append(policy.decide(build_state(events), "c001", T, W))
    events += [
        e.model_copy(update={"round": 2}) if isinstance(e, CandidateProposed) else e
        for e in proposed("c002", list(W))
    ]
    return build_state(events + in_window("c002", c002, per_block=1))


def test_a_first_window_clear_of_every_bar_is_owed_no_second_window():
    """The softmax on the H200: c002 at 1.75x beside an incumbent at 1.08x cost 12 s in its
    first window and 42 s in its second. Once an earlier second window measured the instances
    and the interval carries them, a win 10% or more above every bar, with no case over max_cv,
    is decided on its first window, and the decision says why."""
    state = _after_a_second_window(
        {"c002": _scaled(1 / 1.5), "baseline": BASE, "c001": _scaled(1 / 1.04)}
    )
    assert state.incumbent_id == "c001"
    assert not policy.owes_second_window(state, "c002", T, W)
    d = policy.decide(state, "c002", T, W)
    assert d.outcome == Outcome.PROMOTED and d.speedup == pytest.approx(1.5), d.reason
    assert d.instance_df == 4 and "held in a second window" not in d.reason
    [note] = [n for n in d.notes if n.startswith("decided on its first window")]
    assert "above the incumbent c001's 1.0400x (at least 10%)" in note and "df 4" in note, note


def test_a_win_near_its_bar_or_before_any_instance_estimate_is_still_owed_a_second_window():
    # 9% over the incumbent: clear of min_speedup, not of the incumbent by 10%
    near = {"c002": _scaled(1 / (1.04 * 1.09)), "baseline": BASE, "c001": _scaled(1 / 1.04)}
    assert policy.owes_second_window(_after_a_second_window(near), "c002", T, W)
    # the run's first promotion: no second window has measured the instances yet
    first = build_state(
        _stale_baseline() + _windowed("c001", {"c001": _scaled(1 / 1.5), "baseline": BASE})
    )
    assert policy.decide(first, "c001", T, W).outcome == Outcome.PROMOTED
    assert policy.owes_second_window(first, "c001", T, W)
    # a case over max_cv: its interval may be a bimodal draw (the H200's elementwise A/A)
    bimodal = [10.0 / 3 * f for f in (1.0, 2.0, 1.0, 1.0, 2.0)]
    jumpy = {"small": bimodal, "large": _scaled(1 / 3)["large"]}
    state = _after_a_second_window({"c002": jumpy, "baseline": BASE, "c001": _scaled(1 / 1.04)})
    d = policy.decide(state, "c002", T, W)
    assert d.outcome == Outcome.PROMOTED and d.ci_low > 1.04 * 1.1, d.reason
    assert max(c.candidate_cv for c in d.cases) > T.max_cv
    assert policy.owes_second_window(state, "c002", T, W)


def test_a_revalidation_that_disagrees_with_its_decision_says_the_machine_changed_and_pools_them():
    """A new user's interpreter run: c002 decided at 7.6x, its revalidation read 12.7x because
    the baseline ran 1.8x slower there (a busy machine), and nothing said so. Now the
    revalidation's event carries the note, with the baseline's move and the pooled figure."""
    events = _stale_baseline() + _windowed("c001", {"c001": FAST, "baseline": BASE})
    events.append(decide(events))
    slow_base = {k: [x * (1.8 if k == "large" else 1.5) for x in v] for k, v in BASE.items()}
    steady = in_window(
        "c001", {"c001": FAST, "baseline": BASE}, phase=Phase.REVALIDATION, per_block=1
    )
    drifted = in_window(
        "c001", {"c001": FAST, "baseline": slow_base}, phase=Phase.REVALIDATION, per_block=1
    )
    r = policy.decide_revalidation(build_state(events + steady), "c001", "baseline", T, W)
    assert r.survived and not any("disagree" in n for n in r.notes), r.notes
    r = policy.decide_revalidation(build_state(events + drifted), "c001", "baseline", T, W)
    assert r.survived and r.speedup == pytest.approx(1.2 * (1.5 * 1.8) ** 0.5), r.reason
    (note,) = [n for n in r.notes if "disagree beyond their intervals" in n]
    assert "c001's decision (1.2000x" in note and "machine's speed changed between them" in note
    assert "the baseline's median on case large went 100.2 -> 180 us" in note
    d = events[-1]
    assert isinstance(d, DecisionMade) and d.speedup == pytest.approx(1.2)
    pooled = pooling.pool(
        [
            pooling.Measurement(d.speedup, d.ci_low, d.ci_high),
            pooling.Measurement(r.speedup, r.ci_low, r.ci_high),
        ]
    )
    assert pooled is not None and f"pooled, the two read {pooled.speedup:.4f}x" in note


def test_times_of_ten_thousand_microseconds_and_more_read_as_plain_numbers():
    """A reason's times in one format: '1.395e+04 -> 8230 us' read as two kinds of number."""
    assert [units.number(v) for v in (13950.4, 8230.0, 183.24, 12.448, 0.5)] == [
        "13950",
        "8230",
        "183.2",
        "12.45",
        "0.5",
    ]
    big = {k: [x * 200 for x in v] for k, v in BASE.items()}
    events = _stale_baseline() + _windowed("c001", {"c001": FAST, "baseline": BASE})
    events.append(decide(events))
    slow = {k: [x * (1.8 if k == "large" else 1.5) for x in v] for k, v in big.items()}
    fast = {k: [x * 200 for x in v] for k, v in FAST.items()}
    drifted = in_window(
        "c001", {"c001": fast, "baseline": slow}, phase=Phase.REVALIDATION, per_block=1
    )
    r = policy.decide_revalidation(build_state(events + drifted), "c001", "baseline", T, W)
    (note,) = [n for n in r.notes if "disagree beyond their intervals" in n]
    assert "the baseline's median on case large went 100.2 -> 36000 us" in note, note
