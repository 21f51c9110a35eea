"""Every verdict the store projects equals the loop's: the fold of a run's log (what the loop acts
on) and the views over the same log in a store give each candidate the same outcome, decided
speedup, "measured" and what its interval carried of instances, each source the same "already measured", each run the same duplicates,
winner chain, winner and stopping reason. For the golden logs, and for generated runs."""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import queries
from tlxstore.events import (
    BASELINE_ID,
    CaseSpeedup,
    DecisionMade,
    DuplicateDetected,
    Envelope,
    Event,
    FailureKind,
    FinalistRevalidated,
    InfrastructureFailed,
    Outcome,
    RunFinished,
    SearchEnded,
    StoppingReason,
)
from tlxstore.fold import RunState, fold
from tlxstore.runlog import read_envelopes
from tlxstore.store import Store
from tlxstore.testing import candidate_events, envelopes, run_started

GOLDEN = Path(__file__).parents[1] / "tlxstore" / "golden"


def fold_verdicts(states: list[RunState]) -> dict[str, Any]:
    """The verdicts as the loop holds them: from the fold of each run's log."""
    out: dict[str, Any] = {
        "decisions": [],
        "candidates": [],
        "sources": {},
        "duplicates": [],
        "revalidations": [],
        "cases": [],
        "runs": [],
    }
    for s in states:
        assert s.started is not None
        for c in s.candidates.values():
            d = c.decision
            key = (s.run_id, c.candidate_id)
            out["candidates"].append((*key, d and d.outcome.value, d and d.speedup))
            if d is not None:
                out["decisions"].append(
                    (
                        *key,
                        d.outcome.value,
                        d.speedup,
                        c.decision_measured,
                        d.instance_df,
                        d.instance_sigma,
                        d.instance_pairs or None,
                    )
                )
                out["cases"] += [(*key, "decision", *_case(x)) for x in d.cases]
            if c.duplicate is not None:
                dup = c.duplicate
                out["duplicates"].append(
                    (*key, dup.match, dup.duplicate_of_run, dup.duplicate_of_candidate)
                )
            source = (c.proposal.source_hash, s.started.measurement_key)
            out["sources"][source] = out["sources"].get(source, False) or c.measured
        for r in s.revalidations:
            out["revalidations"].append((s.run_id, r.candidate_id, r.survived, r.speedup))
            out["cases"] += [(s.run_id, r.candidate_id, "revalidation", *_case(x)) for x in r.cases]
        f = s.finished
        winner = s.candidates.get(f.winner_id) if f and f.winner_id else None
        out["runs"].append(
            (
                s.run_id,
                "finished" if f else "unfinished",
                f and f.stopping_reason.value,
                f and f.success,
                f and f.winner_id,
                winner and winner.proposal.source_hash,
                winner and winner.decision and winner.decision.speedup,
                f and f.speedup,
                sum(cid != BASELINE_ID for cid in s.candidates),  # the baseline aside
            )
        )
    return _sorted(out)


def view_verdicts(store: Store) -> dict[str, Any]:
    """The same verdicts as the store's views answer them."""

    def rows(sql: str) -> list[tuple]:
        return [tuple(r.values()) for r in queries.query(store, sql).to_pylist()]

    out = {
        "decisions": rows(
            "SELECT run_id, candidate_id, outcome, decided_speedup, measured, instance_df, "
            "instance_sigma, nullif(instance_pairs, []) FROM decisions"
        ),
        "candidates": rows("SELECT run_id, candidate_id, outcome, decided_speedup FROM candidates"),
        "sources": {
            (h, k): m
            for h, k, m in rows("SELECT source_hash, measurement_key, measured FROM seen_sources")
        },
        "duplicates": rows(
            "SELECT run_id, candidate_id, match, duplicate_of_run, duplicate_of_candidate "
            "FROM duplicates"
        ),
        "revalidations": rows(
            "SELECT run_id, candidate_id, survived, revalidated_speedup FROM revalidations "
            "ORDER BY run_id, event_seq"
        ),
        "cases": rows(
            "SELECT run_id, candidate_id, stage, case_id, weight, baseline_median_us, "
            "candidate_median_us, speedup FROM case_speedups"
        ),
        "runs": rows(
            "SELECT run_id, status, stopping_reason, success, winner_id, winner_source_hash, "
            "winner_decided_speedup, revalidated_speedup, candidates FROM runs"
        ),
    }
    return _sorted(out)


def _case(x: CaseSpeedup) -> tuple:
    return (x.case_id, x.weight, x.baseline_median_us, x.candidate_median_us, x.speedup)


def _sorted(verdicts: dict[str, Any]) -> dict[str, Any]:
    """Rows in one order (the revalidations of a run keep theirs: the winner chain)."""

    def order(name: str, row: tuple) -> list[str]:
        return [str(x) for x in (row[:1] if name == "revalidations" else row)]

    return {
        k: v if isinstance(v, dict) else sorted(v, key=lambda r, k=k: order(k, r))
        for k, v in verdicts.items()
    }


def _stored(logs: list[list[Envelope]]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "store.duckdb")
        store.ingest([env for log in logs for env in log])
        return view_verdicts(store)


@pytest.mark.parametrize("log", ["v1", "v7"])
def test_the_views_give_the_golden_logs_the_loops_verdicts(log):
    envs = read_envelopes(GOLDEN / log)
    assert fold_verdicts([fold(envs)]) == _stored([envs])


# ---- generated runs -----------------------------------------------------------------------------

SOURCES = [f"def kernel(): return {i}" for i in range(5)]  # few: sources repeat across runs


def _source(draw) -> str:
    text = draw(st.sampled_from(SOURCES))
    return text.replace(" ", "  ", 1) if draw(st.booleans()) else text  # a normalized twin


def _failure(cid: str) -> InfrastructureFailed:
    return InfrastructureFailed(
        candidate_id=cid, stage="benchmark", kind=FailureKind.TIMEOUT, retryable=True
    )


@st.composite
def runs(draw, run_id: str, earlier: list[tuple[str, str]]) -> tuple[list[Event], list]:
    """One run as the loop writes it (or, `recorded` false, as tlxdb wrote it before decisions
    recorded `measured`): a baseline, candidates measured, cut short by a failure, found to be
    duplicates or left undecided; failures after a decision (in a revalidation); the winner
    chain; finished or cut off. Returns its events and its (run, candidate) pairs."""
    recorded = draw(st.booleans())
    events: list[Event] = [run_started()]
    base = candidate_events(BASELINE_ID, _source(draw), samples=draw(st.integers(1, 3)))
    events += base if draw(st.booleans()) else base[:-1]  # the loop decides no baseline
    if draw(st.booleans()):
        events.append(_failure(BASELINE_ID))  # a device's baseline measurement timed out
    seen = [*earlier, (run_id, BASELINE_ID)]
    promoted: list[str] = []
    n = draw(st.integers(0, 5))
    for i in range(1, n + 1):
        cid = f"c{i:03d}"
        kind = draw(st.sampled_from(["measured", "cut short", "duplicate", "undecided"]))
        outcome = draw(st.sampled_from([Outcome.PROMOTED, Outcome.REJECTED, Outcome.FAILED]))
        life = candidate_events(
            cid,
            _source(draw),
            round_=i,
            samples=draw(st.integers(1, 3)),
            base_us=draw(st.sampled_from([80.0, 95.0, 100.0, 120.0])),
            outcome=outcome,
        )
        decision = next(e for e in life if isinstance(e, DecisionMade))
        cut = life.index(decision)
        if kind == "duplicate":
            run, of = draw(st.sampled_from(seen))
            match = draw(st.sampled_from(["raw", "normalized"]))
            life = [
                *life[:2],
                DuplicateDetected(
                    candidate_id=cid, match=match, duplicate_of_run=run, duplicate_of_candidate=of
                ),
                decision.model_copy(update={"outcome": Outcome.DUPLICATE, "cases": []}),
            ]
        elif kind == "cut short":
            life = [*life[: draw(st.integers(2, cut))], _failure(cid), life[cut]]
        elif kind == "undecided":
            life = life[: draw(st.integers(2, cut))]
        if kind != "undecided":
            i_d = next(k for k, e in enumerate(life) if isinstance(e, DecisionMade))
            d = life[i_d]
            assert isinstance(d, DecisionMade)
            clean = kind == "measured"  # the loop's rule: no duplicate, no retryable failure
            instances = draw(
                st.sampled_from(
                    [{}, {"instance_df": 0}, {"instance_df": 4, "instance_sigma": 0.012}]
                )
            )
            if instances.get("instance_df") and draw(st.booleans()):
                instances["instance_pairs"] = [1.04, 1.025, 1.02]
            life[i_d] = d.model_copy(update={"measured": clean if recorded else None, **instances})
            if d.outcome == Outcome.PROMOTED and kind != "duplicate":
                promoted.append(cid)
            if draw(st.integers(0, 4)) == 0:
                life.append(_failure(cid))  # e.g. its revalidation timed out
        events += life
        seen.append((run_id, cid))
    winner = None
    for cid in draw(st.permutations(promoted))[: draw(st.integers(0, 3))]:
        survived = draw(st.booleans())
        events.append(
            FinalistRevalidated(
                candidate_id=cid,
                survived=survived,
                reason="r",
                speedup=draw(st.sampled_from([None, 0.97, 1.2, 1.25])),
                ci_low=None,
                ci_high=None,
                alternations=3,
            )
        )
        if survived:
            winner = cid
            break
    if draw(st.booleans()):
        reason = draw(st.sampled_from(list(StoppingReason)))
        events.append(SearchEnded(reason=reason))
        speedup = next(
            (e.speedup for e in reversed(events) if isinstance(e, FinalistRevalidated)), None
        )
        events.append(
            RunFinished(
                stopping_reason=reason,
                success=winner is not None,
                winner_id=winner,
                speedup=speedup if winner else None,
            )
        )
    return events, seen[len(earlier) :]


@st.composite
def stores(draw) -> list[list[Envelope]]:
    """The logs of up to 24 runs that share one measurement key (and so one another's sources)."""
    logs: list[list[Envelope]] = []
    seen: list[tuple[str, str]] = []
    for r in range(draw(st.integers(1, 24))):
        run_id = f"r{r:02d}"
        events, pairs = draw(runs(run_id, seen))
        logs.append(envelopes(run_id, events, at=datetime(2026, 12, 1, r, tzinfo=UTC)))
        seen += pairs
    return logs


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(logs=stores())
def test_the_views_give_generated_runs_the_loops_verdicts(logs):
    assert fold_verdicts([fold(log) for log in logs]) == _stored(logs)
