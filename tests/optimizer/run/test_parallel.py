"""Parallel evaluation (`--devices`) on 4 simulated devices (TLXDB_SIMULATED_DEVICES), with a
harness whose benchmark sleeps a fixed time and returns samples fixed by the source: a round of 8
candidates runs concurrently, decides exactly as a serial run of the same candidates, and a run
killed with SIGKILL while evaluations are in flight resumes without losing or repeating any."""

from __future__ import annotations

import os
import signal
from itertools import combinations

import pytest
from support.drive_run import ROUND8, parallel_request, start_held
from support.scripted_provider import ScriptedProvider

from optimizer.run import lifecycle, redecide
from tlxstore.events import (
    BASELINE_ID,
    BuildFinished,
    DecisionMade,
    DeviceEvaluated,
    DevicesAssigned,
    Envelope,
    SearchEnded,
    StoppingReason,
)
from tlxstore.fold import fold
from tlxstore.runlog import read_envelopes

pytestmark = pytest.mark.slow

SIM = {"TLXDB_SIMULATED_DEVICES": "4", "SLEEP_HARNESS_S": "0.3"}


def _decisions(envs: list[Envelope]) -> list[tuple]:
    """Every decision with what decides it: candidate, knobs, outcome, speedup, incumbent, and
    whether its interval lies above 1.0. Not the interval itself: a candidate measured in a
    parallel round beside a baseline only (its incumbent promoted while it was measured) has a
    second window that the serial run, which measured it beside that incumbent, did not owe it,
    and its interval is over the pairs of instances of both windows."""
    state = fold(envs)
    return [
        (
            d.candidate_id,
            state.candidates[d.candidate_id].proposal.knobs,
            d.outcome,
            d.speedup,
            d.ci_low is not None and d.ci_low > 1.0,
            d.compared_to,
        )
        for d in (e.event for e in envs)
        if isinstance(d, DecisionMade)
    ]


def _evaluations(envs: list[Envelope]) -> list[DeviceEvaluated]:
    return [e.event for e in envs if isinstance(e.event, DeviceEvaluated)]


@pytest.fixture(scope="module")
def serial(tmp_path_factory) -> list[Envelope]:
    """The same round, one candidate at a time (no --devices)."""
    tmp = tmp_path_factory.mktemp("serial")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SLEEP_HARNESS_S", SIM["SLEEP_HARNESS_S"])
        lifecycle.optimize(parallel_request(tmp, None), provider=ScriptedProvider(list(ROUND8)))
    envs = read_envelopes(tmp / "out")
    assert not _evaluations(envs) and fold(envs).devices is None
    return envs


def test_a_round_of_8_on_4_simulated_devices_runs_concurrently_and_decides_as_a_serial_run(
    tmp_path, monkeypatch, serial
):
    for k, v in SIM.items():
        monkeypatch.setenv(k, v)
    result = lifecycle.optimize(parallel_request(tmp_path), provider=ScriptedProvider(list(ROUND8)))
    envs = read_envelopes(tmp_path / "out")
    state = fold(envs)
    assert result.stopping_reason == StoppingReason.MAX_ROUNDS
    assert state.devices == DevicesAssigned(
        devices=["0", "1", "2", "3"], pin_variable=None, simulated=True
    )
    evals = _evaluations(envs)
    # the baseline once on each other device, each candidate once; all recorded as simulated
    assert sorted(e.candidate_id for e in evals) == sorted(
        [BASELINE_ID] * 3 + [f"c00{i}" for i in range(1, 9)]
    )
    assert {e.device for e in evals if e.candidate_id == BASELINE_ID} == {"1", "2", "3"}
    assert all(e.simulated for e in evals)
    # each child was pinned to its device: the harness saw it (its verify diagnostics name it)
    for e in evals:
        seen = {
            v.diagnostics
            for v in state.candidates[e.candidate_id].verifications
            if v.candidate_id == e.candidate_id
        }
        assert f"simulated device {e.device}" in seen
    # concurrency, from the recorded intervals: candidates on different devices overlapped in time,
    # and no device ever ran two evaluations at once (a round larger than the devices queued)
    rounds = [e for e in evals if e.candidate_id != BASELINE_ID]
    overlapping = [
        (a, b)
        for a, b in combinations(rounds, 2)
        if a.started_at < b.finished_at and b.started_at < a.finished_at
    ]
    assert overlapping and all(a.device != b.device for a, b in overlapping)
    assert len({e.device for e in rounds}) > 1
    # decisions in proposal order, identical to the serial run's, and to a re-decision
    decided = [d[0] for d in _decisions(envs)]
    assert decided == [f"c00{i}" for i in range(1, 9)]
    assert _decisions(envs) == _decisions(serial)
    replay = redecide.redecide(envs)
    assert all(d.replayed == d.recorded for d in replay.decisions)
    assert (
        state.finished is not None and state.finished.winner_id == fold(serial).finished.winner_id
    )


def test_a_run_killed_mid_round_resumes_without_losing_or_repeating_an_evaluation(tmp_path, serial):
    gate = tmp_path / "gate"  # the benchmarks of BLOCK_SIZE 512 and 16 wait for it: in flight
    env = {**SIM, "SLEEP_HARNESS_GATE": str(gate), "SLEEP_HARNESS_GATED": "512,16"}
    proc = start_held(tmp_path, "DeviceEvaluated:c001", parallel=True, env=env)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=120)
    gate.write_text("")  # the orphaned children may finish now; nobody reads them
    before = read_envelopes(tmp_path / "out")
    done_before = {e.candidate_id for e in _evaluations(before)}
    assert "c001" in done_before and not {"c003", "c007"} & done_before  # 512 and 16 were running

    lifecycle.resume(
        str(tmp_path / "out"), tmp_path / "store.duckdb", provider=ScriptedProvider(list(ROUND8))
    )

    after = read_envelopes(tmp_path / "out")
    assert after[: len(before)] == before  # nothing recorded was lost or rewritten
    evals = _evaluations(after)
    candidates = [e.candidate_id for e in evals if e.candidate_id != BASELINE_ID]
    assert sorted(candidates) == [f"c00{i}" for i in range(1, 9)]  # each exactly once
    search = after[: next(i for i, e in enumerate(after) if isinstance(e.event, SearchEnded))]
    builds = [
        e.event.candidate_id
        for e in search
        if isinstance(e.event, BuildFinished) and e.event.candidate_id != BASELINE_ID
    ]
    assert sorted(builds) == sorted(candidates)  # no evaluation ran twice, none was retried
    assert set(fold(after).candidates) == {BASELINE_ID, *candidates}
    assert _decisions(after) == _decisions(serial)
