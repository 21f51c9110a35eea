"""The machine's state per benchmark call, in real harness children on the interpreter: NVML
read from the recorded trace (TLXDB_NVML_TRACE in the bundle's environment reaches the child
only), and not read at all where it is unavailable."""

from __future__ import annotations

from support.machine import NVML_TRACE
from test_evaluate import ADD_KERNEL, CASES, make_bundle, of, request, run

from optimizer.decision import machine
from optimizer.evaluation.evaluator import Evaluator
from optimizer.evaluation.requests import Reference
from tlxstore.events import BASELINE_ID, BenchmarkSampled, MachineSampled


def _window(tmp_path, env):
    ev = Evaluator(make_bundle(tmp_path, cases=CASES[:1], env=env))
    baseline = Reference(candidate_id=BASELINE_ID, source=ADD_KERNEL)
    return run(ev, request(repetitions=4, references=[baseline], profile=False))


def test_every_benchmark_call_has_its_machine_state_and_a_marked_block_is_measured_again(
    tmp_path,
):
    """Two blocks of two calls take the trace's first four calls (tests/fixtures/machine: quiet,
    power cap, hardware slowdown: the baseline's call of block 1, quiet); that block is measured
    again (block 2), where c001's call meets another process (the trace's fifth), so block 3
    follows."""
    summary, events = _window(tmp_path, {"TLXDB_NVML_TRACE": str(NVML_TRACE)})
    assert summary.benchmarked, summary
    sampled, states = of(events, BenchmarkSampled), of(events, MachineSampled)
    key = lambda e: (e.candidate_id, e.case_id, e.phase, e.window_id, e.block)  # noqa: E731
    assert [key(s) for s in sampled] == [key(m) for m in states]
    assert all(events.index(m) == events.index(s) + 1 for s, m in zip(sampled, states, strict=True))
    assert [(s.candidate_id, s.block, s.extra) for s in sampled] == [
        ("c001", 0, False), (BASELINE_ID, 0, False),
        (BASELINE_ID, 1, False), ("c001", 1, False),
        ("c001", 2, True), (BASELINE_ID, 2, True),
        (BASELINE_ID, 3, True), ("c001", 3, True),
    ]  # fmt: skip
    marked = [(m.candidate_id, m.block) for m in states if machine.marks(m)]
    assert marked == [(BASELINE_ID, 1), ("c001", 2)]
    assert states[4].neighbours and all(m.source == "recorded" for m in states)


def test_on_the_interpreter_no_machine_state_is_read_and_the_window_is_as_before(tmp_path):
    summary, events = _window(tmp_path, {})
    assert summary.benchmarked, summary
    assert of(events, MachineSampled) == []
    assert [(s.candidate_id, s.block) for s in of(events, BenchmarkSampled)] == [
        ("c001", 0), (BASELINE_ID, 0), (BASELINE_ID, 1), ("c001", 1),
    ]  # fmt: skip
