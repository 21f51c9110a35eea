"""The per-candidate lookups: dedup across runs, exclusions, prior bests."""

from __future__ import annotations

from optimizer.providers.base import Exclusion, MeasuredCandidate
from queries import lookups
from tlxstore.events import FailureKind, InfrastructureFailed, Outcome
from tlxstore.hashing import digest_text
from tlxstore.store import Store
from tlxstore.testing import (
    MEASUREMENT_KEY,
    candidate_events,
    cut_short,
    ingest_run,
    run_started,
    small_run,
)

_ingest = ingest_run


def _hashes(source: str) -> tuple[str, str]:
    return digest_text(source), digest_text(" ".join(source.split()))


def test_find_measured_matches_raw_then_normalized_across_runs(store_path):
    store = Store(store_path)
    _ingest(store, "r1", small_run(2, tag="t"))
    raw, norm = _hashes("def kernel(): return 1  # t")
    hit = lookups.find_measured(store, MEASUREMENT_KEY, raw, norm)
    assert hit is not None and (hit.run_id, hit.candidate_id, hit.match, hit.outcome) == (
        "r1",
        "c001",
        "raw",
        "rejected",
    )
    reformatted = lookups.find_measured(store, MEASUREMENT_KEY, digest_text("other bytes"), norm)
    assert reformatted is not None and reformatted.match == "normalized"


def test_find_measured_ignores_other_identities_and_unmeasured_sources(store_path):
    store = Store(store_path)
    _ingest(store, "r1", small_run(1, tag="t"))
    raw, norm = _hashes("def kernel(): return 1  # t")
    assert lookups.find_measured(store, "sha256:another-gpu", raw, norm) is None
    # proposed, then an infrastructure failure: retryable, so the source is not burnt
    events = [run_started(), *candidate_events("c001", "def k(): pass")[:2]]
    events.append(
        InfrastructureFailed(
            candidate_id="c001", stage="benchmark", kind=FailureKind.TIMEOUT, retryable=True
        )
    )
    _ingest(store, "r2", events)
    assert lookups.find_measured(store, MEASUREMENT_KEY, *_hashes("def k(): pass")) is None


def test_a_decision_after_an_infrastructure_failure_is_not_measured(store_path):
    """As the loop records a timeout: the failure, then DecisionMade(failed). The store alone says
    the source is not measured (proj_decisions.measured); the same decision without the failure is."""
    store = Store(store_path)
    source = "def k(): return 7"
    cut = cut_short("c001", source)
    _ingest(store, "r1", [run_started(), *cut])
    assert lookups.find_measured(store, MEASUREMENT_KEY, *_hashes(source)) is None
    _ingest(store, "r2", [run_started(), *cut[:2], cut[3]])
    hit = lookups.find_measured(store, MEASUREMENT_KEY, *_hashes(source))
    assert hit is not None and (hit.run_id, hit.outcome) == ("r2", "failed")


def test_measured_candidates_are_the_optimizer_models(store_path):
    store = Store(store_path)
    _ingest(store, "r1", small_run(2))
    _ingest(store, "r2", small_run(1, tag="b"))
    got = lookups.measured_candidates(store, MEASUREMENT_KEY)
    assert all(isinstance(m, MeasuredCandidate) for m in got)
    assert [(m.run_id, m.candidate_id) for m in got] == [
        ("r1", "c001"),
        ("r1", "c002"),
        ("r2", "c001"),
    ]
    assert got[0].knobs == {"BLOCK": 64, "num_warps": 4} and got[0].outcome == "rejected"


def test_exclusions_group_across_runs(store_path):
    store = Store(store_path)
    _ingest(store, "r1", small_run(2))
    _ingest(store, "r2", small_run(3, tag="again"))
    got = lookups.exclusions(store, "sha256:bundle", "cpu-interpreter")
    assert all(isinstance(e, Exclusion) for e in got)
    assert [(e.signature, e.occurrences) for e in got] == [
        ("BLOCK=64,num_warps=4", 2),
        ("BLOCK=128,num_warps=4", 1),
    ]
    assert lookups.exclusions(store, "sha256:bundle", "NVIDIA H200") == []


def test_prior_best_excludes_this_run_and_orders_by_speedup(store_path):
    store = Store(store_path)
    _ingest(store, "r1", small_run(1))  # c001 promoted at 100/99
    _ingest(store, "r2", small_run(3, tag="b"))  # c003 promoted at 100/97
    _ingest(store, "r3", small_run(2, tag="c"))
    got = lookups.prior_best(store, MEASUREMENT_KEY, exclude_run="r3")
    assert [(m.run_id, m.candidate_id) for m in got] == [("r2", "c003"), ("r1", "c001")]
    assert all(m.outcome == Outcome.PROMOTED.value for m in got)
    assert lookups.prior_best(store, MEASUREMENT_KEY, exclude_run="r3", limit=1)[0].run_id == "r2"


def test_dedup_sees_what_another_process_wrote_since_its_last_lookup(store_path):
    """The key replica refreshes when the store's generation moves, whoever wrote."""
    mine, theirs = Store(store_path), Store(store_path)
    raw, norm = _hashes("def kernel(): return 1  # late")
    assert lookups.find_measured(mine, MEASUREMENT_KEY, raw, norm) is None
    _ingest(theirs, "r1", small_run(1, tag="late"))
    hit = lookups.find_measured(mine, MEASUREMENT_KEY, raw, norm)
    assert hit is not None and hit.run_id == "r1"


def test_prompt_context_is_the_three_lookups_in_one_visit(store_path):
    store = Store(store_path)
    _ingest(store, "r1", small_run(2))
    _ingest(store, "r2", small_run(3, tag="b"))
    together = lookups.prompt_context(
        store, MEASUREMENT_KEY, "sha256:bundle", "cpu-interpreter", "r2"
    )
    assert together == (
        lookups.measured_candidates(store, MEASUREMENT_KEY),
        lookups.exclusions(store, "sha256:bundle", "cpu-interpreter"),
        lookups.prior_best(store, MEASUREMENT_KEY, "r2"),
    )
    assert together[0] and together[1] and together[2]


def test_lookups_rebuild_their_replica_when_the_tables_were_rewritten(store_path):
    """The lookup tables rewritten under a live replica (rows moved, one exclusion removed by
    hand), then another write: the refresh sees that the store's tables are not the replica's
    rows plus the new ones and rebuilds, so the lookups follow the store, not stale rows."""
    import duckdb

    store = Store(store_path)
    _ingest(store, "r1", small_run(2, tag="x"))
    raw, norm = _hashes("def kernel(): return 2  # x")
    assert lookups.find_measured(store, MEASUREMENT_KEY, raw, norm).candidate_id == "c002"
    assert lookups.exclusions(store, "sha256:bundle", "cpu-interpreter")[0].occurrences == 1
    store.close()
    con = duckdb.connect(str(store_path))
    for table, keep in (("proj_decisions", "true"), ("proj_exclusions", "candidate_id <> 'c001'")):
        con.execute(f"CREATE TEMP TABLE moved AS SELECT * FROM {table} ORDER BY seq DESC")
        con.execute(f"DELETE FROM {table}")
        con.execute(f"INSERT INTO {table} SELECT * FROM moved WHERE {keep}")
        con.execute("DROP TABLE moved")
    con.close()
    _ingest(Store(store_path), "r2", small_run(1, tag="y"))  # the generation moves
    hit = lookups.find_measured(store, MEASUREMENT_KEY, raw, norm)
    assert hit is not None and (hit.run_id, hit.candidate_id) == ("r1", "c002")
    assert lookups.exclusions(store, "sha256:bundle", "cpu-interpreter") == []
    measured = lookups.measured_candidates(store, MEASUREMENT_KEY)
    assert [(m.run_id, m.candidate_id) for m in measured] == [
        ("r1", "c001"),
        ("r1", "c002"),
        ("r2", "c001"),
    ]
