"""The remeasure provider re-proposes a recorded run's candidates, read back through the store."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import make_context, nearest_config

from optimizer.providers import ProviderOptions
from optimizer.providers.base import MeasuredCandidate, Proposal, SearchExhausted
from optimizer.providers.remeasure import RemeasureProvider, create
from tlxstore.errors import ConfigError, UnknownRunError
from tlxstore.events import CandidateProposed, Outcome, new_run_id
from tlxstore.runlog import RunLog
from tlxstore.store import Store
from tlxstore.testing import candidate_events, small_run


def record_run(tmp_path: Path, store_path: Path, events) -> str:
    run_id = new_run_id()
    out = tmp_path / run_id
    out.mkdir()
    log = RunLog.create(out, run_id)
    log.append(events)
    Store(store_path).ingest_log(out)
    return run_id


def drain(provider: RemeasureProvider, ctx=None) -> list[Proposal | SearchExhausted]:
    ctx = ctx or make_context("cpu", "")
    out: list[Proposal | SearchExhausted] = []
    while not out or isinstance(out[-1], Proposal):
        out.append(provider.propose(ctx, lambda e: None))
    return out


def test_replay_reproposes_every_candidate_in_order_with_its_metadata(tmp_path, store_path):
    events = small_run(n_candidates=3, output_dir=str(tmp_path))
    run_id = record_run(tmp_path, store_path, events)
    recorded = [
        e for e in events if isinstance(e, CandidateProposed) and e.candidate_id != "baseline"
    ]
    sources = {e.source_hash: e.text for e in events if e.type == "SourceStored"}

    results = drain(create(ProviderOptions(remeasure_run=run_id, store=store_path)))

    *proposals, done = results
    assert (
        isinstance(done, SearchExhausted)
        and f"re-measured all 3 candidates of run {run_id}" == done.reason
    )
    assert [p.remeasures for p in proposals] == [f"{run_id}/{c.candidate_id}" for c in recorded]
    assert [p.source for p in proposals] == [sources[c.source_hash] for c in recorded]
    assert [p.hypothesis for p in proposals] == [c.hypothesis for c in recorded]
    assert [p.knobs for p in proposals] == [c.knobs for c in recorded]


def test_a_source_proposed_twice_in_the_recorded_run_is_replayed_once(tmp_path, store_path):
    events = small_run(n_candidates=2, output_dir=str(tmp_path))
    finished = events.pop()
    events += candidate_events("c003", "def kernel(): return 1  # ", outcome=Outcome.DUPLICATE)[1:]
    events.append(finished)
    run_id = record_run(tmp_path, store_path, events)
    *proposals, _ = drain(create({"remeasure_run": run_id, "store": store_path}))
    assert [p.remeasures for p in proposals] == [f"{run_id}/c001", f"{run_id}/c002"]


def test_a_resumed_replay_skips_what_this_run_already_measured(tmp_path, store_path):
    events = small_run(n_candidates=3, output_dir=str(tmp_path))
    run_id = record_run(tmp_path, store_path, events)
    first = next(e for e in events if isinstance(e, CandidateProposed) and e.candidate_id == "c001")
    ctx = make_context(
        "cpu",
        "",
        run_id="r-new",
        measured=[
            # measured by the new run before it was interrupted
            MeasuredCandidate(
                run_id="r-new",
                candidate_id="c001",
                source_hash=first.source_hash,
                outcome="rejected",
            ),
            # measured by the recorded run itself: replay re-measures on purpose
            MeasuredCandidate(
                run_id=run_id, candidate_id="c002", source_hash="sha256:other", outcome="rejected"
            ),
        ],
    )
    *proposals, _ = drain(create({"remeasure_run": run_id, "store": store_path}), ctx)
    assert [p.remeasures for p in proposals] == [f"{run_id}/c002", f"{run_id}/c003"]


def test_replay_accepts_a_run_id_prefix_or_an_output_folder(tmp_path, store_path):
    run_id = record_run(tmp_path, store_path, small_run(n_candidates=1, output_dir=str(tmp_path)))
    assert create({"remeasure_run": run_id[:-2], "store": store_path}).run_id == run_id
    other_store = tmp_path / "other.duckdb"
    assert create({"remeasure_run": str(tmp_path / run_id), "store": other_store}).run_id == run_id


def test_an_unknown_run_or_missing_flag_is_refused(store_path):
    Store(store_path)
    with pytest.raises(UnknownRunError, match="no run 'r-nope'"):
        create({"remeasure_run": "r-nope", "store": store_path})
    with pytest.raises(ConfigError, match="--provider remeasure needs --store PATH"):
        create(ProviderOptions(remeasure_run="r-nope"))


def test_without_a_run_replay_re_measures_the_nearest_history_of_this_kernel_source(
    tmp_path, store_path
):
    run_id = record_run(tmp_path, store_path, small_run(3))
    store = Store(store_path)
    rows = store.query(
        "SELECT candidate_id, source_hash, text FROM proj_candidates JOIN proj_sources "
        "USING (source_hash) WHERE run_id = $r ORDER BY candidate_id",
        {"r": run_id},
    ).to_pylist()
    texts = {r["candidate_id"]: r for r in rows}
    nearest = [
        nearest_config(  # measured for an edited kernel: not this kernel's configuration
            rank=1,
            from_run_id=run_id,
            from_candidate_id="c001",
            source_hash=texts["c001"]["source_hash"],
            same_source=False,
        ),
        nearest_config(  # already measured under this identity
            rank=2,
            from_run_id=run_id,
            from_candidate_id="c002",
            source_hash=texts["c002"]["source_hash"],
            same_source=True,
        ),
        nearest_config(
            rank=3,
            from_run_id=run_id,
            from_candidate_id="c003",
            source_hash=texts["c003"]["source_hash"],
            same_source=True,
            knobs={"BLOCK": 192},
            differs="same bundle; same device; Triton 3.3.0 → 3.4.0",
        ),
    ]
    measured = [
        MeasuredCandidate(
            run_id="r-now",
            candidate_id="c001",
            source_hash=texts["c002"]["source_hash"],
            outcome="rejected",
        )
    ]
    provider = create(ProviderOptions(store=store_path))
    assert provider.run_id is None
    first, done = drain(provider, make_context("cpu", "", nearest=nearest, measured=measured))
    assert isinstance(first, Proposal) and isinstance(done, SearchExhausted)
    assert first.source == texts["c003"]["text"] and first.knobs == {"BLOCK": 192}
    assert first.remeasures == f"{run_id}/c003"
    assert "Triton 3.3.0 → 3.4.0" in first.evidence
    assert "re-measured the 1 best-known configurations" in done.reason
