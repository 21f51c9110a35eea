"""The machine in decisions, fed by recorded machine states (tests/fixtures/machine) through the
store: runs are ingested into a real store and decided from the events read back. A call under a
degrading clocks event reason or beside another process is left out of the decision (and only
that call: the software power cap marks nothing); a case with nothing left fails unmeasured; a
host-bound case is named; a finalist is kept only when its replicates agree."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from support import machine as m

import queries
from optimizer.decision import policy
from tlxstore.events import (
    BASELINE_ID,
    BenchmarkSampled,
    Event,
    MachineSampled,
    Outcome,
    Phase,
)
from tlxstore.fold import RunState, fold
from tlxstore.store import Store
from tlxstore.testing import ingest_run

CASE = "decode"
QUICK = [90.0, 90.3]  # the candidate's samples of one call
BASE = [100.0, 100.4]
SLOW = [150.0, 151.0]  # what a throttled or shared call measured


def window_run(kinds: dict[tuple[str, int], str], slow: set[tuple[str, int]], blocks: int = 6):
    """c001's window: `blocks` blocks of a baseline call and a c001 call each; the calls in
    `kinds` ran in that machine state (else quiet), those in `slow` measured SLOW."""
    events: list[Event] = [*m.started(), *m.proposal("c001", 512), *m.verified("c001", (CASE,))]
    for b in range(blocks):
        for cid, fast in (("c001", QUICK), (BASELINE_ID, BASE)):
            samples = SLOW if (cid, b) in slow else fast
            events += m.call(cid, CASE, "c001", b, samples, kinds.get((cid, b), "quiet"))
    return events


def through_store(tmp_path, events: list[Event], run_id: str = "r-machine") -> RunState:
    store = Store(tmp_path / f"{run_id}.duckdb")
    ingest_run(store, run_id, events)
    return fold(store.run_envelopes(run_id))


def without(events: list[Event], drop: Callable[[Event], bool]) -> list[Event]:
    return [e for e in events if not drop(e)]


def decide(state: RunState, cid: str = "c001"):
    return policy.decide(state, cid, m.T, {CASE: 1.0})


def numbers(d):
    return (d.outcome, d.speedup, d.ci_low, d.ci_high, [c.candidate_samples for c in d.cases])


def call_of(cid: str, block: int) -> Callable[[Event], bool]:
    return lambda e: (
        isinstance(e, BenchmarkSampled | MachineSampled)
        and e.candidate_id == cid
        and e.block == block
        and e.window_id == "c001"
    )


@pytest.mark.parametrize("kind", ["degrading", "shared"])
def test_a_call_on_a_throttled_or_shared_gpu_is_kept_in_the_store_and_left_out_of_the_decision(
    tmp_path, kind
):
    marked = {("c001", 1), ("c001", 3), ("c001", 4)}
    events = window_run(dict.fromkeys(marked, kind), slow=marked)
    decided = decide(through_store(tmp_path, events))
    clean = through_store(
        tmp_path,
        without(events, lambda e: any(call_of(c, b)(e) for c, b in marked)),
        "r-clean",
    )
    assert numbers(decided) == numbers(decide(clean))
    assert decided.outcome == Outcome.PROMOTED and decided.cases[0].candidate_samples == 6
    # counted in the decision's note
    [note] = [n for n in decided.notes if "throttled or was shared" in n]
    assert note.startswith("3 of 12 benchmark calls ran while the GPU throttled or was shared")
    # with the slow calls counted as any other, the same evidence rejects the candidate
    quiet = through_store(tmp_path, window_run({}, slow=marked), "r-quiet")
    assert decide(quiet).outcome == Outcome.REJECTED
    # the samples stay in the store, marked in the view that answers the documented question
    store = Store(tmp_path / "r-machine.duckdb")
    rows = queries.query(
        store,
        "SELECT candidate_id, block, marked, throttled, shared, samples_us FROM machine_states "
        "WHERE marked ORDER BY block",
    ).to_pylist()
    assert [(r["candidate_id"], r["block"]) for r in rows] == sorted(marked, key=lambda x: x[1])
    assert all(r["samples_us"] == SLOW for r in rows)
    assert all(
        r["throttled"] is (kind == "degrading") and r["shared"] is (kind == "shared") for r in rows
    )


def test_a_reference_call_that_was_marked_leaves_its_block_out_of_the_comparison(tmp_path):
    events = window_run({(BASELINE_ID, 2): "degrading"}, slow={(BASELINE_ID, 2)})
    decided = decide(through_store(tmp_path, events))
    clean = through_store(tmp_path, without(events, call_of(BASELINE_ID, 2)), "r-clean")
    assert numbers(decided) == numbers(decide(clean))
    assert decided.cases[0].baseline_samples == 10


def test_the_software_power_cap_alone_marks_nothing(tmp_path):
    capped = {("c001", 1), (BASELINE_ID, 1), ("c001", 3)}
    events = window_run(dict.fromkeys(capped, "capped"), slow={("c001", 1), ("c001", 3)})
    decided = decide(through_store(tmp_path, events))
    every_call = through_store(tmp_path, window_run({}, {("c001", 1), ("c001", 3)}), "r-all")
    assert numbers(decided) == numbers(decide(every_call))
    assert decided.cases[0].candidate_samples == 12
    assert not any("throttled or was shared" in n for n in decided.notes)


def test_a_case_with_every_call_marked_fails_unmeasured_so_its_source_may_come_again(tmp_path):
    everything = {("c001", b): "shared" for b in range(4)}
    state = through_store(tmp_path, window_run(everything, slow=set(everything), blocks=4))
    decided = decide(state)
    assert decided.outcome == Outcome.FAILED and decided.measured is False
    assert decided.reason.startswith("no benchmark call of case decode ran on a quiet GPU")
    assert any("4 of 8 benchmark calls" in n for n in decided.notes)


def test_a_host_bound_case_is_named_in_the_decision_with_what_kernel_changes_can_move(tmp_path):
    """25.9 us per call, 4.92 us of it on the GPU: the SwiGLU decode case the TLX agent's
    harness measured on the H200 (docs/MEASUREMENTS.md)."""
    events: list[Event] = [*m.started(), *m.proposal("c001", 512), *m.verified("c001", (CASE,))]
    for b in range(4):
        events += m.call("c001", CASE, "c001", b, [25.8, 26.0])
        events += m.call(BASELINE_ID, CASE, "c001", b, [29.0, 29.2])
    # one call of do_bench: 10 timed launches of the kernel, each after an L2 flush (torch's
    # kernel, not the candidate's, and not in its samples)
    flush = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int>>"
    ran = {"decode_kernel": (49.21, 10), flush: (612.0, 10)}
    decided = decide(through_store(tmp_path, [*events, m.attribution("c001", CASE, ran)]))
    [note] = [n for n in decided.notes if "host work" in n]
    assert note == (
        "case decode: 81% of the time is host work; kernel changes move at most 19% "
        "(25.9 us per call, 4.921 us of it on the GPU)"
    )
    # a case whose kernel takes most of its latency is not host-bound
    busy = {"decode_kernel": (250.0, 10), flush: (612.0, 10)}
    again = decide(through_store(tmp_path, [*events, m.attribution("c001", CASE, busy)], "r2"))
    assert not any("host work" in n for n in again.notes)


def replicated_run(speedups: list[float], marked_block: tuple[int, int] | None = None):
    """c001 revalidated in one window per replicate (c001, c001.replicate2, ...), each of three
    blocks, its speedup over the baseline as given; `marked_block`: (replicate, block) of a
    baseline call beside another process, measured 3x slow."""
    events: list[Event] = [*m.started(), *m.proposal("c001", 512), *m.verified("c001", (CASE,))]
    for r, speedup in enumerate(speedups):
        wid = "c001" if r == 0 else f"c001.replicate{r + 1}"
        for b in range(3):
            shared = marked_block == (r, b)
            base = [300.0, 300.6] if shared else [100.0, 100.2]
            events += m.call(
                BASELINE_ID, CASE, wid, b, base, "shared" if shared else "quiet", Phase.REVALIDATION
            )
            fin = [100.0 / speedup, 100.2 / speedup]
            events += m.call("c001", CASE, wid, b, fin, phase=Phase.REVALIDATION)
    return events


def revalidate(state: RunState, tolerance: float = 0.02, strict: bool = False):
    t = m.T.model_copy(update={"replicate_tolerance": tolerance, "strict_noise": strict})
    return policy.decide_revalidation(state, "c001", BASELINE_ID, t, {CASE: 1.0})


def test_replicates_that_differ_in_size_keep_a_win_that_holds_in_each_with_a_note(tmp_path):
    """On the H200 (benchmarks/results/h200_machine_2026-12-04) a 2% bound refused every finalist
    of a softmax with a host-bound case: replicates 1.45x, 1.45x, 1.34x. They differ in how large
    the win is, not in whether there is one: kept, with the smallest quoted."""
    state = through_store(tmp_path, replicated_run([1.10, 1.10, 1.05]))
    r = revalidate(state)
    assert r.survived and r.replicate_speedups == pytest.approx([1.10, 1.10, 1.05], rel=1e-3)
    [note] = [n for n in r.notes if "differ in size" in n]
    assert "above the bound of 2.00%" in note and "1.0500x, is the one to quote" in note
    # at 5% the same replicates agree
    kept = revalidate(state, tolerance=0.05)
    assert kept.survived and any("3 replicates in fresh children agree" in n for n in kept.notes)


def test_a_finalist_whose_replicates_disagree_on_the_win_is_not_kept(tmp_path):
    """One replicate below min_speedup (1.01): the replicates disagree on the win itself."""
    r = revalidate(through_store(tmp_path, replicated_run([1.10, 1.10, 1.005])))
    assert not r.survived and "its 3 replicates in fresh children disagree" in r.reason
    assert "above the bound of 2.00% (--replicate-tolerance)" in r.reason
    assert r.speedup is not None and r.alternations == 9  # the pooled comparison is reported


def test_strict_noise_refuses_replicates_that_differ_beyond_the_bound(tmp_path):
    """--strict-noise keeps the TLX agent's rule: a verdict only when replicates agree."""
    r = revalidate(through_store(tmp_path, replicated_run([1.10, 1.10, 1.05])), strict=True)
    assert not r.survived and "its 3 replicates in fresh children disagree" in r.reason


def test_replicates_that_agree_keep_the_finalist_and_a_marked_call_leaves_its_replicate_block_out(
    tmp_path,
):
    state = through_store(tmp_path, replicated_run([1.10, 1.101, 1.099], marked_block=(1, 2)))
    r = revalidate(state)
    assert r.survived, r.reason
    assert r.replicate_speedups == pytest.approx([1.10, 1.101, 1.099], rel=1e-3)
    assert r.alternations == 8  # 9 blocks, one of them marked
    assert any(n.startswith("replicate 2: 1 of 6 benchmark calls") for n in r.notes)
