"""The metric model: canonical units, attribution, merging."""

from __future__ import annotations

import pytest

from profilers.metrics import (
    KernelShare,
    Metric,
    MetricSource,
    ProfileSummary,
    canonical_unit,
    shares,
)


@pytest.mark.parametrize(
    ("value", "unit", "expected"),
    [
        (50368.0, "nsecond", (50.368, "us")),
        (1.5, "msecond", (1500.0, "us")),
        (2.0, "Mbyte", (2e6, "bytes")),
        (4.24, "Tbyte/second", (4.24e12, "bytes/s")),
        (89.8, "%", (89.8, "pct")),
        (16.0, "register/thread", (16.0, "register/thread")),
        (None, "nsecond", (None, "us")),
    ],
)
def test_canonical_unit(value, unit, expected):
    got = canonical_unit(value, unit)
    assert got[1] == expected[1]
    assert got[0] == pytest.approx(expected[0]) if expected[0] is not None else got[0] is None


def test_fractions_are_unknown_when_any_time_is_unknown():
    assert all(s.fraction is None for s in shares({"a": 1.0, "b": None}, {"a": 1, "b": 1}))
    assert all(s.fraction is None for s in shares({"a": 0.0}, {"a": 1}))
    ordered = shares({"small": 1.0, "big": 3.0}, {})
    assert [s.name for s in ordered] == ["big", "small"]
    assert ordered[0].fraction == 0.75 and ordered[0].count is None


def test_merged_keeps_the_first_attribution_and_every_diagnostic():
    a = ProfileSummary(
        metrics=[Metric(name="t", value=1.0, unit="us", source=MetricSource.PROTON)],
        attribution=[KernelShare(name="k", count=1, time_us=1.0, fraction=1.0)],
        diagnostics=["a"],
        artifacts=["/x"],
    )
    b = ProfileSummary(
        metrics=[Metric(name="t", value=None, unit="us", source=MetricSource.NCU)],
        attribution=[KernelShare(name="other", count=1, time_us=2.0, fraction=1.0)],
        diagnostics=["b"],
        artifacts=["/x", "/y"],
    )
    m = a.merged(b)
    assert m.kernel_names == ["k"] and m.diagnostics == ["a", "b"] and m.artifacts == ["/x", "/y"]
    assert m.metric("t", MetricSource.NCU).value is None  # type: ignore[union-attr]
    assert ProfileSummary().merged(b).kernel_names == ["other"]


def test_metric_converts_to_the_store_model_field_by_field():
    from tlxstore.events import ProfileMetric  # the optimizer's conversion, shown once here

    m = Metric(name="gpu__time_duration.sum", value=None, unit="us", source=MetricSource.NCU)
    stored = ProfileMetric(**m.model_dump(mode="json"))
    assert (stored.name, stored.value, stored.unit, stored.source) == (m.name, None, "us", "ncu")
