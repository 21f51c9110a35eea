"""The fold: the state a live run builds as it appends equals the fold of its log, and of the store."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tlxstore.events import (
    FailureKind,
    InfrastructureFailed,
    IntegrityFlagged,
    ModelExchanged,
    Outcome,
    RunFinished,
    StoppingReason,
)
from tlxstore.fold import RunState, fold
from tlxstore.runlog import RunLog
from tlxstore.store import Store
from tlxstore.testing import candidate_events, run_started

finite_us = st.floats(min_value=0.5, max_value=1e6, allow_nan=False, allow_infinity=False)


@st.composite
def runs(draw):
    """A run as the loop could emit it: candidates with any outcome, interleaved extras, cut
    into batches of any size."""
    events = [run_started()]
    n = draw(st.integers(min_value=0, max_value=6))
    for i in range(n + 1):
        cid = "baseline" if i == 0 else f"c{i:03d}"
        if i and draw(st.booleans()):
            events.append(
                ModelExchanged(
                    exchange_id=f"x{i}",
                    provider="llm",
                    model="m",
                    prompt=draw(st.text(max_size=30)),
                    reply=draw(st.none() | st.text(max_size=30)),
                    latency_ms=draw(finite_us),
                )
            )
        life = candidate_events(
            cid,
            f"def k(): return {i}  # {draw(st.text(max_size=8))}",
            round_=draw(st.integers(min_value=1, max_value=5)),
            cases=tuple(
                draw(
                    st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3, unique=True)
                )
            ),
            samples=draw(st.integers(min_value=1, max_value=12)),
            base_us=draw(finite_us),
            outcome=draw(st.sampled_from([Outcome.PROMOTED, Outcome.REJECTED, Outcome.FAILED])),
            knobs=draw(
                st.dictionaries(
                    st.sampled_from(["BLOCK", "num_warps", "num_stages"]), st.integers(1, 1024)
                )
            ),
        )
        if draw(st.booleans()):  # an evaluation that died: cut the lifecycle short
            life = life[: draw(st.integers(min_value=2, max_value=len(life)))]
            life.append(
                InfrastructureFailed(
                    candidate_id=cid, stage="benchmark", kind=FailureKind.TIMEOUT, retryable=True
                )
            )
        if draw(st.booleans()):
            life.insert(
                3,
                IntegrityFlagged(
                    candidate_id=cid, guard="tripwire:speedup>10x", detail="x", blocking=False
                ),
            )
        events += life
    if draw(st.booleans()):
        events.append(
            InfrastructureFailed(
                candidate_id=None, stage="propose", kind=FailureKind.PROVIDER, retryable=True
            )
        )
    events.append(
        RunFinished(
            stopping_reason=draw(st.sampled_from(list(StoppingReason))), success=draw(st.booleans())
        )
    )
    cuts = sorted(
        set(draw(st.lists(st.integers(min_value=1, max_value=len(events) - 1), max_size=8)))
    )
    bounds = [0, *cuts, len(events)]
    return [events[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def _live(log: RunLog, batches) -> RunState:
    live = RunState()
    for batch in batches:
        for env in log.append(batch):
            live.apply(env)
    return live


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=runs())
def test_live_state_equals_the_fold_of_the_log(batches):
    with tempfile.TemporaryDirectory() as tmp:
        log = RunLog.create(Path(tmp) / "out", "r1")
        live = _live(log, batches)
        assert fold(log.envelopes()) == live
        assert fold(RunLog.open(Path(tmp) / "out").envelopes()) == live


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=runs())
def test_live_state_equals_the_fold_of_the_store(batches):
    with tempfile.TemporaryDirectory() as tmp:
        log = RunLog.create(Path(tmp) / "out", "r1")
        live = _live(log, batches)
        store = Store(Path(tmp) / "store.duckdb")
        for batch_envs in _split(log.envelopes(), [len(b) for b in batches]):
            store.ingest(batch_envs)
        assert fold(store.run_envelopes("r1")) == live


def _split(envs, sizes):
    out, start = [], 0
    for n in sizes:
        out.append(envs[start : start + n])
        start += n
    return out
