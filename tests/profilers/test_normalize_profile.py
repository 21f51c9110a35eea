"""normalize(): a harness profile() result (docs/CONTRACT.md §1) into a typed ProfileSummary."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profilers.metrics import MetricSource
from profilers.normalize import MAX_NOTE_CHARS, normalize

DATA = Path(__file__).parent / "data"

# The shape the TLX agent's Proton guidance asks harnesses to return, with a flat ncu section.
TLX_STYLE = {
    "proton": {
        "level": "summary",
        "scope": {"experiment_id": "candidate-r2-c1", "case_id": "c", "hook": "triton"},
        "wrapper": {"median_us": 81.0, "kernel_launches": 1, "kernel_window_us": 78.4},
        "artifacts": {"hatchet": "/abs/proton.hatchet", "commands": "/abs/proton.commands.txt"},
        "diagnostics": [],
    },
    "ncu": {
        "gpu__time_duration.sum": {"value": 125000.0, "unit": "ns"},
        "dram__bytes_read.sum": {"value": None, "unit": "byte"},
    },
}


def test_tlx_style_result_becomes_typed_metrics():
    summary = normalize(TLX_STYLE)
    median = summary.metric("wrapper.median_us", MetricSource.PROTON)
    assert median is not None and (median.value, median.unit) == (81.0, "us")
    assert summary.metric("wrapper.kernel_launches").unit == "count"  # type: ignore[union-attr]
    duration = summary.metric("gpu__time_duration.sum", MetricSource.NCU)
    assert duration is not None and (duration.value, duration.unit) == (125.0, "us")
    assert summary.artifacts == ["/abs/proton.hatchet", "/abs/proton.commands.txt"]


def test_null_stays_unknown_with_a_diagnostic():
    summary = normalize(TLX_STYLE)
    read = summary.metric("dram__bytes_read.sum")
    assert read is not None and read.value is None and read.unit == "bytes"
    assert any("dram__bytes_read.sum unreadable" in d for d in summary.diagnostics)
    bare = normalize({"ncu": {"sm__throughput.avg.pct_of_peak_sustained_elapsed": None}})
    (metric,) = bare.metrics
    assert metric.value is None and metric.source == MetricSource.NCU
    assert any("is null" in d for d in bare.diagnostics)


def test_unknown_keys_are_kept_as_diagnostics():
    summary = normalize(TLX_STYLE)
    assert "proton: kept level = 'summary'" in summary.diagnostics
    assert "proton: kept scope.hook = 'triton'" in summary.diagnostics
    long = normalize({"proton": {"note": "x" * 1000}})
    (note,) = long.diagnostics
    assert len(note) < MAX_NOTE_CHARS + 40 and note.endswith("...")


def test_harness_keys_outside_the_tools_are_harness_metrics():
    summary = normalize({"metrics": {"achieved_bytes": 1024, "bad": "n/a"}, "occupancy_pct": 51.5})
    assert summary.metric("achieved_bytes").source == MetricSource.HARNESS  # type: ignore[union-attr]
    assert summary.metric("achieved_bytes").unit == "bytes"  # type: ignore[union-attr]
    assert summary.metric("occupancy_pct").unit == "pct"  # type: ignore[union-attr]
    assert "harness: kept bad = 'n/a'" in summary.diagnostics


def test_times_in_ns_or_ms_keys_are_stored_in_microseconds():
    summary = normalize({"proton": {"kernel_time_ns": 2500, "window_ms": 1.5}})
    assert summary.metric("kernel_time_us").value == pytest.approx(2.5)  # type: ignore[union-attr]
    assert summary.metric("window_us").value == pytest.approx(1500.0)  # type: ignore[union-attr]


def test_kernel_lists_give_attribution_preferring_proton():
    result = {
        "ncu": {"kernels": [{"name": "only_ncu", "time_us": 5.0, "count": 1}]},
        "proton": {
            "kernels": [
                {"name": "a", "time_ns": 3000, "count": 2},
                {"name": "b", "time_us": 1.0, "count": 1},
                {"name": "a", "time_us": 4.0, "count": 1},
                {"time_us": 9.0},
            ]
        },
    }
    summary = normalize(result)
    assert summary.kernel_names == ["a", "b"]
    assert (
        summary.attribution[0].time_us == pytest.approx(7.0) and summary.attribution[0].count == 3
    )
    assert summary.attribution[0].fraction == pytest.approx(7.0 / 8.0)
    assert any("without a name" in d for d in summary.diagnostics)
    assert normalize({"ncu": result["ncu"]}).kernel_names == ["only_ncu"]


def test_a_referenced_hatchet_is_read_when_no_kernels_are_given(tmp_path):
    hatchet = tmp_path / "proton.hatchet"
    shutil.copy(DATA / "softmax_h200.hatchet", hatchet)
    summary = normalize({"proton": {"artifacts": {"hatchet": str(hatchet)}}})
    assert summary.kernel_names[0] == "softmax_kernel"
    assert summary.artifacts == [str(hatchet)]


def test_relative_artifact_paths_are_kept_and_flagged():
    summary = normalize({"ncu": {"artifacts": ["report.ncu-rep", 7]}})
    assert summary.artifacts == ["report.ncu-rep"]
    assert "ncu: artifact path is not absolute: report.ncu-rep" in summary.diagnostics
    assert any("not a path" in d for d in summary.diagnostics)


@pytest.mark.parametrize(
    "odd", [None, 3, "text", [1, 2], {"proton": 5}, {"ncu": None}, {"proton": {"kernels": 4}}]
)
def test_odd_results_give_diagnostics(odd):
    summary = normalize(odd)
    assert summary.diagnostics
    assert summary.attribution == []


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "proton",
                    "ncu",
                    "kernels",
                    "metrics",
                    "artifacts",
                    "diagnostics",
                    "value",
                    "unit",
                    "name",
                    "time_us",
                    "count",
                    "x_us",
                ]
            ),
            children,
            max_size=5,
        )
    ),
    max_leaves=25,
)


@settings(max_examples=200, deadline=None)
@given(JSON)
def test_normalize_never_raises_and_never_invents_zero(value):
    summary = normalize(value)
    json.dumps(summary.model_dump(mode="json"))
    for metric in summary.metrics:
        assert metric.value is None or metric.value == metric.value  # no NaN
