"""Every view answers on an empty store and computes what it promises on a real run."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

import queries
from tlxstore.events import (
    BASELINE_ID,
    Envelope,
    Outcome,
    ProfileCollected,
    ProfileMetric,
    ProfilingFinished,
    RooflineAssessed,
)
from tlxstore.hashing import digest_text
from tlxstore.store import Store
from tlxstore.testing import candidate_events, decided, ingest_run, run_started, small_run

EXPECTED_VIEWS = {
    "runs",
    "candidates",
    "samples",
    "case_results",
    "profiles",
    "profiling_phases",
    "decisions",
    "exclusions",
    "seen_sources",
    "model_exchanges",
    "commits",
    "rooflines",
    "builds",
    "case_speedups",
    "duplicates",
    "excluded_signatures",
    "infrastructure_failures",
    "integrity_flags",
    "kernel_history",
    "revalidations",
    "run_identity",
    "run_settings",
    "source_estimates",
    "throughput",
    "trends",
    "verifications",
}


def _ingest(store: Store, run_id: str, events) -> None:
    store.ingest(
        Envelope(
            event_id=f"{run_id}-{i}",
            run_id=run_id,
            seq=i,
            recorded_at=datetime(2026, 11, 30, 12, 0, i % 60, tzinfo=UTC),
            event=e,
        )
        for i, e in enumerate(events)
    )


def test_the_documented_views_exist():
    assert set(queries.names()) >= EXPECTED_VIEWS


@pytest.mark.parametrize("name", sorted(EXPECTED_VIEWS))
def test_each_view_answers_on_an_empty_store(store_path, name):
    assert queries.view(Store(store_path), name).num_rows == 0


def test_unknown_view_names_are_listed():
    with pytest.raises(KeyError, match="no view 'nope'; views: builds, candidates"):
        queries.view_sql("nope")


def test_runs_view_shows_start_and_finish(store_path):
    store = Store(store_path)
    _ingest(store, "r1", small_run(2))
    _ingest(store, "r2", small_run(1)[:-1])  # still running
    rows = {r["run_id"]: r for r in queries.view(store, "runs").to_pylist()}
    assert rows["r1"]["stopping_reason"] == "max_rounds" and rows["r1"]["winner_id"] == "c002"
    assert rows["r1"]["candidates"] == 2 and rows["r1"]["events"] == len(small_run(2))
    assert rows["r2"]["finished_at"] is None and rows["r2"]["device_kind"] == "cpu-interpreter"


def test_samples_view_has_one_row_per_sample_and_case_results_match_the_stats_module(store_path):
    from optimizer.decision import stats

    store = Store(store_path)
    _ingest(store, "r1", small_run(1))
    samples = queries.query(
        store,
        "SELECT sample_us FROM samples WHERE candidate_id='c001' AND case_id='small' ORDER BY sample_index",
    )
    values = samples.column("sample_us").to_pylist()
    assert len(values) == 5
    row = queries.query(
        store, "SELECT * FROM case_results WHERE candidate_id='c001' AND case_id='small'"
    ).to_pylist()[0]
    n = stats.summarize(values)
    assert row["samples"] == n.samples == 5
    assert row["median_us"] == pytest.approx(n.median_us)
    assert row["p95_us"] == pytest.approx(n.p95_us)
    assert row["cv"] == pytest.approx(n.cv)


def test_profiles_view_is_long_and_keeps_unknown_as_null(store_path):
    store = Store(store_path)
    _ingest(
        store,
        "r1",
        [
            ProfileCollected(
                candidate_id="c1",
                case_id="a",
                metrics=[
                    ProfileMetric(name="duration_ns", value=1500.0, unit="ns", source="proton"),
                    ProfileMetric(name="dram_bytes_read", value=None, unit="bytes", source="ncu"),
                ],
            )
        ],
    )
    rows = queries.query(
        store, "SELECT metric, value, unit, source FROM profiles ORDER BY metric"
    ).to_pylist()
    assert rows == [
        {"metric": "dram_bytes_read", "value": None, "unit": "bytes", "source": "ncu"},
        {"metric": "duration_ns", "value": 1500.0, "unit": "ns", "source": "proton"},
    ]


def test_profiling_phases_view_sums_what_profiling_cost_a_run(store_path):
    store = Store(store_path)
    _ingest(
        store,
        "r1",
        [
            ProfilingFinished(
                candidate_id="c1", tool="proton", cases=2, wall_ms=410.0, waited_ms=410.0
            ),
            ProfilingFinished(
                candidate_id="c1",
                tool="ncu",
                level="summary",
                cases=2,
                wall_ms=1630.0,
                waited_ms=2140.0,
            ),
        ],
    )
    rows = queries.query(
        store,
        "SELECT tool, level, cases, wall_ms, waited_ms FROM profiling_phases ORDER BY tool",
    ).to_pylist()
    assert rows == [
        {"tool": "ncu", "level": "summary", "cases": 2, "wall_ms": 1630.0, "waited_ms": 2140.0},
        {"tool": "proton", "level": None, "cases": 2, "wall_ms": 410.0, "waited_ms": 410.0},
    ]
    (total,) = queries.query(store, "SELECT sum(waited_ms) AS s FROM profiling_phases").to_pylist()
    assert total["s"] == 2550.0


def test_candidates_and_decisions_views_join_hypotheses(store_path):
    store = Store(store_path)
    _ingest(store, "r1", small_run(2))
    cands = {r["candidate_id"]: r for r in queries.view(store, "candidates").to_pylist()}
    assert cands["c001"]["outcome"] == "rejected" and cands["c002"]["outcome"] == "promoted"
    dec = queries.query(
        store, "SELECT hypothesis FROM decisions WHERE candidate_id = 'c002'"
    ).to_pylist()
    assert dec == [{"hypothesis": "hypothesis of c002"}]
    excl = queries.view(store, "exclusions").to_pylist()
    assert [e["signature"] for e in excl] == ["BLOCK=64,num_warps=4"]


def test_seen_sources_spans_runs_and_marks_measured(store_path):
    store = Store(store_path)
    _ingest(store, "r1", small_run(1, tag="x"))
    _ingest(
        store, "r2", small_run(1, tag="x")[:-1] + candidate_events("c009", "def never(): pass")[:2]
    )
    rows = {r["first_candidate_id"]: r for r in queries.view(store, "seen_sources").to_pylist()}
    assert (
        rows["c001"]["runs"] == 2
        and rows["c001"]["first_run_id"] == "r1"
        and rows["c001"]["measured"]
    )
    assert rows["c009"]["measured"] is False


def test_a_query_sees_only_the_views_it_names():
    needed = queries.views_for("SELECT * FROM case_results JOIN runs USING (run_id)")
    assert {"case_results", "runs"} <= set(needed) and "commits" not in needed
    assert queries.views_for("SELECT 1") == {}


def test_a_column_alias_comment_or_string_named_like_a_view_defines_no_view():
    # `runs` has a column `candidates`: reading it reads the runs view, not the candidates view
    needed = queries.views_for(
        "SELECT 'trends' AS t, candidates FROM runs -- the commits view is not read here"
    )
    assert list(needed) == ["run_identity", "runs"]
    assert set(queries.views_for("SELECT * FROM kernel_history")) == {
        "kernel_history",
        "runs",
        "run_identity",
        "source_estimates",
        "source_measurements",
    }


def test_a_text_the_parser_refuses_still_names_its_views_for_its_own_error():
    assert "runs" in queries.views_for("EXPLAIN SELECT * FROM runs")


def test_case_results_cv_is_zero_for_one_sample(store_path):
    from tlxstore.events import BenchmarkSampled

    store = Store(store_path)
    _ingest(store, "r1", [BenchmarkSampled(candidate_id="c1", case_id="a", samples_us=[4.0])])
    assert queries.query(store, "SELECT cv FROM case_results").column("cv").to_pylist() == [0.0]
    assert np.isfinite(
        queries.query(store, "SELECT median_us FROM case_results").column("median_us")[0].as_py()
    )


def test_outcomes_in_views_are_the_enum_values(store_path):
    store = Store(store_path)
    _ingest(store, "r1", small_run(2))
    got = set(
        queries.query(store, "SELECT DISTINCT outcome FROM decisions").column("outcome").to_pylist()
    )
    assert got <= {o.value for o in Outcome}


def test_rooflines_view_has_one_row_per_case_with_nulls_and_the_disagreement(store_path):
    store = Store(store_path)
    point = dict(candidate_id="c1", time_us=132.9, time_source="ncu", bound="memory")
    _ingest(
        store,
        "r1",
        [
            RooflineAssessed(
                case_id="a", bandwidth_fraction=0.95, disagreement="ncu is 2x", **point
            ),
            RooflineAssessed(case_id="b", **point),
        ],
    )
    rows = queries.query(
        store, "SELECT case_id, bandwidth_fraction, flops, disagreement FROM rooflines ORDER BY 1"
    ).to_pylist()
    assert rows == [
        {"case_id": "a", "bandwidth_fraction": 0.95, "flops": None, "disagreement": "ncu is 2x"},
        {"case_id": "b", "bandwidth_fraction": None, "flops": None, "disagreement": None},
    ]


def _measured_run(
    store: Store, run_id: str, measured: list[tuple[str, str, float, float, float]]
) -> None:
    """A run of one baseline whose candidates (id, source, speedup, CI) are each promoted."""
    events = [run_started(), *candidate_events(BASELINE_ID, "def kernel(): pass  # base")]
    for cid, source, speedup, lo, hi in measured:
        events += decided(cid, digest_text(source), Outcome.PROMOTED, speedup, (lo, hi))
    ingest_run(store, run_id, events)


def test_kernel_history_names_the_best_source_by_pooled_estimate_not_its_luckiest_measurement(
    store_path,
):
    store = Store(store_path)
    # A measured twice, 23.3x and 19.2x; B once, 22x, as precisely: A pools to about 21x
    _measured_run(store, "r1", [("c001", "A", 23.3, 22.0, 24.7)])
    _measured_run(store, "r2", [("c001", "A", 19.2, 18.1, 20.4)])
    _measured_run(store, "r3", [("c001", "B", 22.0, 20.8, 23.3)])
    (row,) = queries.query(store, "SELECT * FROM kernel_history").to_pylist()
    assert row["best_source_hash"] == digest_text("B")
    assert (row["best_pooled_speedup"], row["best_measurements"]) == (pytest.approx(22.0), 1)
    a = queries.query(
        store,
        "SELECT * FROM source_estimates WHERE source_hash = $h",
        {"h": digest_text("A")},
    ).to_pylist()
    assert [(r["measurements"], r["runs"], r["first_run_id"]) for r in a] == [(2, 2, "r1")]
    assert 19.2 < a[0]["pooled_speedup"] < 22.0


def test_kernel_history_names_the_first_measured_of_tied_best_sources(store_path):
    store = Store(store_path)
    _measured_run(store, "r2", [("c001", "B", 2.0, 1.9, 2.1)])  # stored first, measured later
    _measured_run(store, "r1", [("c001", "A", 2.0, 1.9, 2.1)])
    (row,) = queries.query(store, "SELECT * FROM kernel_history").to_pylist()
    assert (row["best_first_run_id"], row["best_source_hash"]) == ("r1", digest_text("A"))


def test_a_source_no_run_promoted_is_pooled_but_never_the_best(store_path):
    store = Store(store_path)
    events = [run_started(), *candidate_events(BASELINE_ID, "def kernel(): pass  # base")]
    events += candidate_events(
        "c001", "def kernel(): return 1", base_us=50.0, outcome=Outcome.REJECTED
    )
    events += candidate_events(
        "c002", "def kernel(): return 2", base_us=99.0, outcome=Outcome.PROMOTED
    )
    ingest_run(store, "r1", events)
    estimates = queries.query(
        store, "SELECT source_hash, promotions FROM source_estimates ORDER BY pooled_speedup DESC"
    ).to_pylist()
    assert [r["promotions"] for r in estimates] == [0, 1]  # the rejected one measured faster
    (row,) = queries.query(store, "SELECT best_source_hash FROM kernel_history").to_pylist()
    assert row["best_source_hash"] == estimates[1]["source_hash"]
