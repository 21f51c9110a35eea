"""Statistics are pure functions: checked against numpy and against known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optimizer.decision import stats

samples = st.lists(st.floats(min_value=0.01, max_value=1e6), min_size=1, max_size=40)


@given(samples)
@settings(max_examples=200, deadline=None)
def test_median_and_p95_agree_with_numpy(xs):
    assert stats.median(xs) == pytest.approx(float(np.median(xs)), rel=1e-12)
    assert stats.p95(xs) == pytest.approx(float(np.quantile(xs, 0.95)), rel=1e-12)


@given(st.lists(st.floats(min_value=0.01, max_value=1e6), min_size=2, max_size=40))
@settings(max_examples=200, deadline=None)
def test_cv_is_the_sample_standard_deviation_over_the_mean(xs):
    expected = float(np.std(xs, ddof=1) / np.mean(xs))
    assert stats.cv(xs) == pytest.approx(expected, rel=1e-9, abs=1e-12)


def test_cv_of_one_sample_is_zero_and_no_samples_is_an_error():
    assert stats.cv([5.0]) == 0.0
    with pytest.raises(ValueError):
        stats.median([])


@given(st.floats(min_value=0.01, max_value=1e6), st.integers(min_value=2, max_value=40))
@settings(max_examples=200, deadline=None)
def test_cv_of_constant_samples_is_exactly_zero(x, n):
    assert stats.cv([x] * n) == 0.0


def test_cv_of_three_samples_of_0_1_is_zero_not_a_rounding_error():
    assert stats.cv([0.1, 0.1, 0.1]) == 0.0


def test_per_case_summarizes_each_case_with_samples_in_order():
    got = stats.per_case({"b": [3.0, 1.0, 2.0], "empty": [], "a": [4.0]})
    assert list(got) == ["b", "a"]
    assert got["b"] == stats.Summary(samples=3, median_us=2.0, p95_us=2.9, cv=0.5)
    assert got["a"] == stats.Summary(samples=1, median_us=4.0, p95_us=4.0, cv=0.0)


def test_weighted_geomean_weights_cases():
    assert stats.weighted_geomean([2.0, 0.5], [1.0, 1.0]) == pytest.approx(1.0)
    assert stats.weighted_geomean([4.0, 1.0], [1.0, 3.0]) == pytest.approx(4.0**0.25)
    with pytest.raises(ValueError):
        stats.weighted_geomean([1.0, -1.0], [1.0, 1.0])


def test_speedup_is_the_weighted_geomean_of_median_ratios():
    base = {"a": [10.0, 10.0, 10.0], "b": [100.0, 90.0, 110.0]}
    cand = {"a": [5.0, 5.0, 6.0], "b": [100.0, 100.0, 100.0]}
    assert stats.speedup(base, cand, {"a": 1.0, "b": 1.0}) == pytest.approx(math.sqrt(2.0))
    assert stats.speedup(base, cand, {"a": 3.0, "b": 1.0}) == pytest.approx(2.0**0.75)


def test_the_interval_brackets_the_point_and_is_deterministic():
    rng = np.random.default_rng(3)
    base = {"a": list(100 * np.exp(rng.normal(0, 0.03, 10)))}
    cand = {"a": list(90 * np.exp(rng.normal(0, 0.03, 10)))}
    w = {"a": 1.0}
    low, high = stats.speedup_interval(base, cand, w)
    assert low < stats.speedup(base, cand, w) < high
    assert (low, high) == stats.speedup_interval(base, cand, w)  # fixed seed: replay agrees
    narrow = stats.speedup_interval(base, cand, w, confidence=0.5)
    assert low < narrow[0] < narrow[1] < high


def test_the_interval_is_a_point_when_there_is_no_noise():
    low, high = stats.speedup_interval({"a": [10.0] * 5}, {"a": [8.0] * 5}, {"a": 1.0})
    assert low == pytest.approx(1.25) and high == pytest.approx(1.25)


def test_the_interval_narrows_with_more_samples():
    rng = np.random.default_rng(5)
    widths = []
    for n in (5, 50):
        base = {"a": list(100 * np.exp(rng.normal(0, 0.05, n)))}
        cand = {"a": list(100 * np.exp(rng.normal(0, 0.05, n)))}
        low, high = stats.speedup_interval(base, cand, {"a": 1.0})
        widths.append(high / low)
    assert widths[1] < widths[0]


def _instances(rng: np.random.Generator, factor: float, blocks: int = 8) -> dict[str, list]:
    """One instance's blocks of two samples per case: its own speed `factor`, CV 1% besides."""
    return {
        case: [list(t * factor * np.exp(rng.normal(0, 0.01, 2))) for _ in range(blocks)]
        for case, t in (("a", 10.0), ("b", 100.0))
    }


def test_instance_variance_recovers_a_known_sigma_from_controls_of_two_instances():
    """Controls measured as a second window measures them: two instances of one source, each at
    its own speed (a lognormal factor of sigma_I 2%), in one window of blocks with 1% noise.
    Pooled over 200 controls of two and three instances, the estimate of sigma_I is within 10%
    of the truth; the spread keeps the windows' noise in, and is larger."""
    rng = np.random.default_rng(5)
    sigma_i = 0.02
    weights = {"a": 1.0, "b": 1.0}
    controls = [
        stats.control(
            [_instances(rng, math.exp(rng.normal(0, sigma_i))) for _ in range(k)],
            weights,
            resamples=400,
        )
        for k in (2, 3) * 100
    ]
    est = stats.instance_variance(controls)
    assert est.df == 300  # one per control of two instances, two per control of three
    assert est.sigma == pytest.approx(sigma_i, rel=0.10)
    assert est.spread > est.variance


def test_instance_variance_of_identical_instances_is_small_and_never_negative():
    """Controls whose instances run alike: what is left is the windows' noise, taken out."""
    rng = np.random.default_rng(6)
    weights = {"a": 1.0, "b": 1.0}
    controls = [
        stats.control([_instances(rng, 1.0), _instances(rng, 1.0)], weights, resamples=400)
        for _ in range(100)
    ]
    est = stats.instance_variance(controls)
    assert 0.0 <= est.sigma < 0.002 and est.spread > 0
    assert stats.instance_variance([]) == stats.InstanceVariance(0.0, 0.0, 0)
    with pytest.raises(ValueError, match="two instances"):
        stats.control([_instances(rng, 1.0)], weights)


def test_the_instance_term_widens_the_interval_of_pairs_of_instances():
    """One window of two instances differing by 4%: without an estimate of how far instances run
    apart the interval is the window's own (blocked_interval); with one (sigma_I 2% from 2
    controls) it widens past 1.0; two pairs of instances narrow it again."""
    rng = np.random.default_rng(8)
    weights = {"a": 1.0, "b": 1.0}
    pair = (_instances(rng, 1.04), _instances(rng, 1.0))
    none = stats.InstanceVariance(0.0, 0.0, 0)
    point, low, high = stats.instance_interval([[pair]], weights, none)
    assert (low, high) == stats.blocked_interval(*pair, weights)
    assert point == pytest.approx(stats.blocked_speedup(*pair, weights)) and low > 1.0
    measured = stats.InstanceVariance(0.02**2, 0.02**2, 2)
    _, wide_low, wide_high = stats.instance_interval([[pair]], weights, measured)
    assert wide_low < 1.0 < point < high < wide_high
    _, two_low, _ = stats.instance_interval([[pair], [pair]], weights, measured)
    assert wide_low < two_low
