"""The loop's planner is a pure function of the folded run: each rule, on synthetic events."""

from datetime import UTC, datetime

from optimizer.run.loop import (
    MAX_DUPLICATES_IN_A_ROW,
    MAX_FINALISTS,
    Budget,
    Step,
    finalists,
    next_slot,
    plan,
    provider_failures_in_a_row,
    signature,
    usable_devices,
)
from tlxstore.events import (
    BenchmarkSampled,
    BuildFinished,
    CandidateProposed,
    DecisionMade,
    DeviceEvaluated,
    DevicesAssigned,
    Envelope,
    FailureKind,
    FinalistRevalidated,
    InfrastructureFailed,
    Outcome,
    RunFinished,
    SearchEnded,
    StoppingReason,
    Thresholds,
)
from tlxstore.fold import fold
from tlxstore.testing import run_started

T = Thresholds(
    max_rounds=2,
    candidates_per_round=2,
    max_candidate_seconds=60,
    max_total_seconds=3600,
    min_speedup=1.01,
    max_cv=0.1,
    benchmark_repetitions=10,
)


def _fold(*events):
    envs = [
        Envelope(event_id=f"e{i}", run_id="r1", seq=i, recorded_at=datetime.now(UTC), event=e)
        for i, e in enumerate(events)
    ]
    return fold(envs), envs


def _proposed(cid, round_=1, knobs=None, parent="baseline"):
    return CandidateProposed(
        candidate_id=cid,
        parent_id=parent,
        round=round_,
        provider="p",
        hypothesis="h",
        source_hash=f"sha256:{cid}",
        normalized_hash=f"sha256:n{cid}",
        knobs=knobs or {},
    )


def _decided(cid, outcome=Outcome.REJECTED, speedup=None):
    return DecisionMade(candidate_id=cid, outcome=outcome, reason="r", speedup=speedup)


BASE = [run_started(), _proposed("baseline", 0, parent=None)]


def test_an_empty_search_proposes_round_1_candidate_1():
    state, _ = _fold(*BASE)
    assert (
        plan(state, T, Budget()) == plan(state, T, Budget())
        and plan(state, T, Budget()).step is Step.PROPOSE
    )
    assert next_slot(state, 2) == (1, 1)


def test_slots_fill_rounds_in_order():
    state, _ = _fold(
        *BASE, _proposed("c001"), _decided("c001"), _proposed("c002"), _decided("c002")
    )
    nxt = plan(state, T, Budget())
    assert (nxt.step, nxt.round, nxt.index) == (Step.PROPOSE, 2, 1)


def test_a_proposed_but_unevaluated_candidate_is_evaluated():
    state, _ = _fold(*BASE, _proposed("c001"))
    assert plan(state, T, Budget()).step is Step.EVALUATE


def test_a_candidate_with_partial_evidence_is_retried_and_does_not_use_a_slot():
    state, _ = _fold(
        *BASE, _proposed("c001"), BuildFinished(candidate_id="c001", success=True, duration_ms=1)
    )
    nxt = plan(state, T, Budget())
    assert (nxt.step, nxt.candidate_id) == (Step.RETRY, "c001")
    interrupted = InfrastructureFailed(
        candidate_id="c001", stage="interrupted", kind=FailureKind.CRASH, retryable=True
    )
    state, _ = _fold(*BASE, _proposed("c001"), interrupted, _decided("c001", Outcome.FAILED))
    assert next_slot(state, 2) == (1, 1)


def test_rounds_exhausted_with_a_promoted_finalist_revalidates_then_finishes():
    events = [*BASE]
    for i, (r, outcome) in enumerate(
        [(1, Outcome.PROMOTED), (1, Outcome.REJECTED), (2, Outcome.FAILED), (2, Outcome.REJECTED)]
    ):
        events += [_proposed(f"c00{i + 1}", r), _decided(f"c00{i + 1}", outcome)]
    state, _ = _fold(*events)
    nxt = plan(state, T, Budget())
    assert (nxt.step, nxt.reason) == (Step.END_SEARCH, StoppingReason.MAX_ROUNDS)
    events.append(SearchEnded(reason=StoppingReason.MAX_ROUNDS))
    state, _ = _fold(*events)
    nxt = plan(state, T, Budget())
    assert (nxt.step, nxt.candidate_id, nxt.reason) == (
        Step.REVALIDATE,
        "c001",
        StoppingReason.MAX_ROUNDS,
    )
    rev = FinalistRevalidated(
        candidate_id="c001",
        survived=True,
        reason="ok",
        speedup=1.5,
        ci_low=1.2,
        ci_high=1.8,
        alternations=3,
    )
    state, _ = _fold(*events, rev)
    assert plan(state, T, Budget(commit=True)).step is Step.COMMIT
    assert plan(state, T, Budget(commit=False)).step is Step.FINISH


def test_the_provider_saying_exhausted_or_failing_three_times_stops_the_search():
    state, _ = _fold(*BASE)
    assert (
        plan(state, T, Budget(exhausted="nothing left")).reason == StoppingReason.SEARCH_EXHAUSTED
    )
    assert plan(state, T, Budget(provider_failures=3)).reason == StoppingReason.PROVIDER_FAILED
    assert plan(state, T, Budget(elapsed_s=3600)).reason == StoppingReason.MAX_TOTAL_SECONDS


def test_an_ended_search_stays_ended_with_its_reason_whatever_the_budget_says_after_a_resume():
    # The provider said "exhausted" (or time ran out) before a crash; the resumed run has a fresh
    # provider and clock, but the recorded end of the search decides.
    ended = SearchEnded(reason=StoppingReason.MAX_TOTAL_SECONDS, detail="time is up")
    state, _ = _fold(*BASE, ended)
    nxt = plan(state, T, Budget(elapsed_s=0.0))
    assert (nxt.step, nxt.reason) == (Step.FINISH, StoppingReason.MAX_TOTAL_SECONDS)


def test_provider_failures_count_since_the_last_proposal():
    fail = InfrastructureFailed(
        candidate_id=None, stage="propose", kind=FailureKind.PROVIDER, retryable=True
    )
    _, envs = _fold(*BASE, fail, _proposed("c001"), _decided("c001"), fail, fail)
    assert provider_failures_in_a_row(envs) == 2


def test_a_finished_run_is_done_but_an_interrupted_one_continues():
    done = RunFinished(stopping_reason=StoppingReason.MAX_ROUNDS, success=False)
    state, _ = _fold(*BASE, done)
    assert plan(state, T, Budget()).step is Step.DONE
    stopped = RunFinished(stopping_reason=StoppingReason.INTERRUPTED, success=False)
    state, _ = _fold(*BASE, stopped)
    assert plan(state, T, Budget()).step is Step.PROPOSE


def test_the_exclusion_signature_is_the_knobs_else_the_change_else_the_hypothesis():
    assert signature(_proposed("c1", knobs={"num_warps": 8, "BLOCK": 64})) == "BLOCK=64,num_warps=8"
    p = _proposed("c2").model_copy(update={"change": "unroll   the\nloop"})
    assert signature(p) == "unroll the loop"
    assert signature(_proposed("c3")) == "h"


# ---- parallel runs (--devices) ----------------------------------------------------------------

NOW = datetime.now(UTC)


def _evaluated(cid, device, *evidence):
    return [
        DeviceEvaluated(
            candidate_id=cid,
            device=device,
            started_at=NOW,
            finished_at=NOW,
            events=len(evidence),
        ),
        *evidence,
    ]


def _sampled(cid):
    return BenchmarkSampled(candidate_id=cid, case_id="n", samples_us=[1.0])


PAR = [
    run_started(),
    DevicesAssigned(devices=["0", "1"], pin_variable="CUDA_VISIBLE_DEVICES"),
    _proposed("baseline", 0, parent=None),
    BenchmarkSampled(candidate_id="baseline", case_id="n", samples_us=[1.0], phase="validation"),
]


def test_a_parallel_run_measures_the_other_devices_baselines_then_fills_a_round_then_evaluates_it():
    state, _ = _fold(*PAR)
    assert plan(state, T, Budget()).step is Step.MEASURE_BASELINES
    with_base = [*PAR, *_evaluated("baseline", "1", _sampled("baseline"))]
    state, _ = _fold(*with_base)
    assert state.candidates["baseline"].sample_devices == ["0", "1"]
    nxt = plan(state, T, Budget())
    assert (nxt.step, nxt.round, nxt.index) == (Step.PROPOSE, 1, 1)
    state, _ = _fold(*with_base, _proposed("c001"))
    nxt = plan(state, T, Budget())
    assert (nxt.step, nxt.round, nxt.index) == (Step.PROPOSE, 1, 2)  # not evaluated yet
    state, _ = _fold(*with_base, _proposed("c001"), _proposed("c002"))
    assert plan(state, T, Budget()).step is Step.EVALUATE_ROUND  # the round is full


def test_a_parallel_round_is_decided_in_proposal_order_whatever_order_evaluations_end_in():
    events = [*PAR, *_evaluated("baseline", "1", _sampled("baseline"))]
    events += [_proposed("c001"), _proposed("c002"), *_evaluated("c002", "0", _sampled("c002"))]
    state, _ = _fold(*events)
    assert plan(state, T, Budget()).step is Step.EVALUATE_ROUND  # c001 first, c002 waits
    state, _ = _fold(*events, *_evaluated("c001", "1", _sampled("c001")))
    assert state.candidates["c001"].device == "1"
    nxt = plan(state, T, Budget())
    assert (nxt.step, nxt.candidate_id) == (Step.DECIDE, "c001")
    state, _ = _fold(*events, *_evaluated("c001", "1", _sampled("c001")), _decided("c001"))
    nxt = plan(state, T, Budget())
    assert (nxt.step, nxt.candidate_id) == (Step.DECIDE, "c002")


def test_a_device_whose_baseline_failed_is_not_used():
    state, _ = _fold(*PAR, *_evaluated("baseline", "1"))
    assert usable_devices(state) == ["0"]
    state, _ = _fold(*PAR, *_evaluated("baseline", "1", _sampled("baseline")))
    assert usable_devices(state) == ["0", "1"]


# ---- the winner chain and a provider that only repeats itself -------------------------------


def _revalidated(cid, survived):
    return FinalistRevalidated(
        candidate_id=cid,
        survived=survived,
        reason="r",
        speedup=None,
        ci_low=None,
        ci_high=None,
        alternations=5,
    )


def test_a_finalist_that_does_not_survive_hands_over_to_the_next_promoted_candidate():
    events = [*BASE]
    for cid, outcome, speedup in [
        ("c001", Outcome.PROMOTED, 1.3),
        ("c002", Outcome.PROMOTED, 1.6),
        ("c003", Outcome.PROMOTED, 1.5),  # the incumbent: it beat c002 in its own window
        ("c004", Outcome.REJECTED, 2.0),
    ]:
        events += [_proposed(cid), _decided(cid, outcome, speedup)]
    events.append(SearchEnded(reason=StoppingReason.MAX_ROUNDS))
    state, _ = _fold(*events)
    assert finalists(state) == ["c003", "c002", "c001"][:MAX_FINALISTS]
    order = []
    for survived in (False, False, True):
        nxt = plan(state, T, Budget())
        assert nxt.step is Step.REVALIDATE
        order.append(nxt.candidate_id)
        events.append(_revalidated(nxt.candidate_id, survived))
        state, _ = _fold(*events)
    assert order == ["c003", "c002", "c001"]
    assert plan(state, T, Budget()).step is Step.FINISH


def test_the_chain_ends_without_a_winner_when_no_finalist_survives():
    events = [*BASE, _proposed("c001"), _decided("c001", Outcome.PROMOTED, 1.2)]
    events += [SearchEnded(reason=StoppingReason.MAX_ROUNDS), _revalidated("c001", False)]
    state, _ = _fold(*events)
    assert plan(state, T, Budget()).step is Step.FINISH


def test_a_provider_that_proposes_only_measured_sources_is_stopped():
    events = [*BASE, _proposed("c001"), _decided("c001")]
    for i in range(2, 2 + MAX_DUPLICATES_IN_A_ROW):
        state, _ = _fold(*events)
        assert plan(state, T.model_copy(update={"max_rounds": 9}), Budget()).step is Step.PROPOSE
        events += [_proposed(f"c{i:03d}", round_=i), _decided(f"c{i:03d}", Outcome.DUPLICATE)]
    state, _ = _fold(*events)
    nxt = plan(state, T.model_copy(update={"max_rounds": 9}), Budget())
    assert (nxt.step, nxt.reason) == (Step.END_SEARCH, StoppingReason.PROVIDER_REPEATING)
