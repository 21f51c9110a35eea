"""Repeated measurements of one source are one estimate: pooled, never the best of them; the
Python (optimizer/decision/pooling.py) and the SQL view (source_estimates) agree."""

from __future__ import annotations

import dataclasses
import itertools
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import queries
from optimizer.decision.pooling import MIN_LOG_SE, Z_99, Estimate, Measurement, pool, pool_by
from tlxstore.events import (
    BASELINE_ID,
    CandidateProposed,
    Event,
    FinalistRevalidated,
    Outcome,
)
from tlxstore.store import Store
from tlxstore.testing import decided, envelopes, run_started


def _m(speedup: float, half_log_width: float) -> Measurement:
    """A measurement whose 99% CI is symmetric in log space: se = half_log_width / Z_99."""
    return Measurement(
        speedup, speedup * math.exp(-half_log_width), speedup * math.exp(half_log_width)
    )


def test_two_measurements_are_their_inverse_variance_weighted_mean_in_log_space():
    # 23.3x measured twice as precisely as 19.2x: weights 4 and 1 on the logs
    e = pool([_m(23.3, 0.1), _m(19.2, 0.2)])
    assert e is not None
    assert e.speedup == pytest.approx(math.exp((4 * math.log(23.3) + math.log(19.2)) / 5))
    assert 19.2 < e.speedup < 23.3  # neither the luckier of the two nor the other
    se = 1 / math.sqrt((Z_99 / 0.1) ** 2 + (Z_99 / 0.2) ** 2)
    assert e.ci_low == pytest.approx(e.speedup * math.exp(-Z_99 * se))
    assert e.ci_high == pytest.approx(e.speedup * math.exp(Z_99 * se))
    assert (e.measurements, e.set_aside) == (2, 0)


def test_the_pooled_interval_is_narrower_than_each_measurements():
    e = pool([_m(3.1, 0.1), _m(3.3, 0.1), _m(3.2, 0.1)])
    assert e is not None and e.ci_low is not None and e.ci_high is not None
    assert math.log(e.ci_high / e.ci_low) == pytest.approx(2 * 0.1 / math.sqrt(3))


def test_a_noisy_lucky_measurement_moves_the_estimate_little():
    e = pool([_m(12.0, 0.05), _m(12.5, 0.05), _m(40.0, 1.5)])
    assert e is not None and e.speedup < 12.6


def test_an_asymmetric_interval_gives_its_width_in_log_space():
    e = pool([Measurement(10.0, 8.0, 20.0)])
    assert e is not None
    se = (math.log(20.0) - math.log(8.0)) / (2 * Z_99)
    assert (e.speedup, e.ci_low, e.ci_high) == pytest.approx(
        (10.0, 10.0 * math.exp(-Z_99 * se), 10.0 * math.exp(Z_99 * se))
    )


def test_a_measurement_without_an_interval_is_set_aside_where_others_have_one():
    e = pool([_m(3.0, 0.1), Measurement(9.0), Measurement(8.0, None, 9.0)])
    alone = pool([_m(3.0, 0.1)])
    assert alone is not None and e == dataclasses.replace(alone, set_aside=2)


def test_without_any_interval_the_estimate_is_the_geometric_mean_and_has_none():
    assert pool([Measurement(2.0), Measurement(8.0)]) == Estimate(4.0, None, None, 2, 0)


def test_an_inverted_or_non_positive_interval_counts_as_none():
    assert pool([Measurement(2.0, 3.0, 1.0)]) == Estimate(2.0, None, None, 1, 0)
    assert pool([Measurement(2.0, 0.0, 3.0)]) == Estimate(2.0, None, None, 1, 0)


def test_a_zero_width_interval_is_very_precise_not_infinitely():
    e = pool([Measurement(2.0, 2.0, 2.0), _m(4.0, 0.5)])
    w_exact, w_noisy = 1 / MIN_LOG_SE**2, (Z_99 / 0.5) ** 2
    assert e is not None and e.speedup == pytest.approx(
        math.exp((w_exact * math.log(2.0) + w_noisy * math.log(4.0)) / (w_exact + w_noisy))
    )
    assert e.speedup > 2.0


def test_a_figure_that_is_not_a_positive_finite_speedup_measures_nothing():
    assert pool([Measurement(0.0), Measurement(-1.0), Measurement(math.inf)]) is None
    assert pool([]) is None
    assert pool([Measurement(0.0), Measurement(2.0)]) == Estimate(2.0, None, None, 1, 0)


def test_pool_by_gives_one_estimate_per_key():
    got = pool_by([("a", _m(2.0, 0.1)), ("b", Measurement(3.0)), ("a", _m(2.0, 0.1))])
    assert set(got) == {"a", "b"}
    assert got["a"].measurements == 2 and got["a"].speedup == pytest.approx(2.0)


# ---- the SQL view computes the same ------------------------------------------------------------

KEYS = ("sha256:key-a", "sha256:key-b")
BASELINES = ("def base(): pass  # a", "def base(): pass  # b")
SOURCES = ("def k(): return 1", "def k(): return 2", "def k(): return 3")
_run_numbers = itertools.count()

speedups = st.floats(min_value=0.05, max_value=80.0, allow_nan=False)
# zero and tiny widths too: the floor on the standard error is part of what is compared
log_widths = st.one_of(
    st.just(0.0), st.floats(min_value=0.0, max_value=0.02), st.floats(min_value=0.0, max_value=2.0)
)
intervals = st.one_of(
    st.none(),
    st.tuples(log_widths, log_widths),  # low and high around the speedup (zero width included)
    st.tuples(speedups, speedups),  # anything: inverted ones count as none
)
measured = st.tuples(
    st.sampled_from(range(len(SOURCES))),
    st.sampled_from([Outcome.PROMOTED, Outcome.REJECTED, Outcome.FAILED, Outcome.DUPLICATE]),
    speedups,
    intervals,
    st.booleans(),  # also revalidated, with a measurement of its own
    speedups,
    intervals,
)
runs = st.lists(
    st.tuples(
        st.sampled_from(range(len(KEYS))),
        st.sampled_from(range(len(BASELINES))),
        st.lists(measured, min_size=1, max_size=4),
    ),
    min_size=1,
    max_size=4,
)


def _interval(speedup: float, given: tuple[float, float] | None) -> tuple[float | None, ...]:
    if given is None:
        return None, None
    a, b = given
    if a <= 2.0 and b <= 2.0:  # log widths below and above the speedup
        return speedup * math.exp(-a), speedup * math.exp(b)
    return a, b


def _source_hash(text: str) -> str:
    from tlxstore.hashing import digest_text

    return digest_text(text)


def _events(key: int, base: int, cands: list) -> tuple[list[Event], list[tuple]]:
    """One run's events, and its measurements as ((key, baseline, source), Measurement)."""
    mk = KEYS[key]
    events: list[Event] = [
        run_started(measurement_key=mk),
        CandidateProposed(
            candidate_id=BASELINE_ID,
            parent_id=None,
            round=0,
            provider="tune",
            hypothesis="",
            source_hash=_source_hash(BASELINES[base]),
            normalized_hash=_source_hash(BASELINES[base]),
        ),
    ]
    expected: list[tuple] = []
    for i, (src, outcome, speedup, ci, revalidated, reval_speedup, reval_ci) in enumerate(cands):
        cid = f"c{i + 1:03d}"
        h = _source_hash(SOURCES[src])
        group = (mk, _source_hash(BASELINES[base]), h)
        lo, hi = _interval(speedup, ci)
        failed = outcome == Outcome.FAILED
        events += decided(
            cid,
            h,
            outcome,
            None if failed else speedup,
            (None, None) if failed else (lo, hi),
            round_=i + 1,
        )
        if outcome in (Outcome.PROMOTED, Outcome.REJECTED):
            expected.append((group, Measurement(speedup, lo, hi)))
        if revalidated:
            rlo, rhi = _interval(reval_speedup, reval_ci)
            events.append(
                FinalistRevalidated(
                    candidate_id=cid,
                    survived=True,
                    reason="generated",
                    speedup=reval_speedup,
                    ci_low=rlo,
                    ci_high=rhi,
                    alternations=3,
                )
            )
            expected.append((group, Measurement(reval_speedup, rlo, rhi)))
    return events, expected


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory) -> Store:
    return Store(Path(tmp_path_factory.mktemp("pooling")) / "s.duckdb")


# no shrinking: each step ingests into a store, and a failure's first example says enough
@settings(
    max_examples=15,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow],
)
@given(generated=runs)
def test_the_view_pools_exactly_as_the_python_does(generated, shared_store):
    # each example is its own kernel file in the shared store (a fresh store costs seconds)
    kernel = f"/k{next(_run_numbers)}/kernel.py"
    expected: list[tuple] = []
    batch = []
    for key, base, cands in generated:
        events, mine = _events(key, base, cands)
        events[0] = events[0].model_copy(update={"kernel_path": kernel})
        batch += envelopes(f"r{next(_run_numbers):05d}", events)
        expected += mine
    shared_store.ingest(batch)
    want = pool_by(expected)
    rows = queries.query(
        shared_store,
        "SELECT * FROM source_estimates WHERE kernel_file = $f",
        {"f": kernel.removeprefix("/")},
    ).to_pylist()
    got = {
        (r["measurement_key"], r["baseline_source_hash"], r["source_hash"]): Estimate(
            r["pooled_speedup"], r["ci_low"], r["ci_high"], r["measurements"], r["set_aside"]
        )
        for r in rows
    }
    assert len(rows) == len(got) == len(want)
    for group, e in want.items():
        g = got[group]
        assert (g.measurements, g.set_aside) == (e.measurements, e.set_aside)
        assert g.speedup == pytest.approx(e.speedup, rel=1e-9)
        assert (g.ci_low is None) == (e.ci_low is None) and (g.ci_high is None) == (
            e.ci_high is None
        )
        if e.ci_low is not None:
            assert (g.ci_low, g.ci_high) == pytest.approx((e.ci_low, e.ci_high), rel=1e-9)


def test_a_provider_pools_the_same_measurements_as_the_view(tmp_path):
    """One derivation: the provider context's measured candidates carry their final
    revalidations (lookups.revalidations, read once a run), and tune pools a source from them
    exactly as source_estimates does; without them it quoted the decision alone ("1
    measurement") where `history` pooled two."""
    from optimizer.providers.tune import _measurements
    from optimizer.run.context import fetch_shared

    store = Store(tmp_path / "s.duckdb")
    first, _ = _events(0, 0, [(0, Outcome.PROMOTED, 2.0, (0.05, 0.05), True, 2.2, (0.04, 0.04))])
    second, _ = _events(
        0,
        0,
        [
            (0, Outcome.PROMOTED, 2.1, (0.05, 0.05), False, 1.0, None),
            (1, Outcome.REJECTED, 0.8, (0.1, 0.1), False, 1.0, None),
        ],
    )
    store.ingest(envelopes("r-first", first) + envelopes("r-second", second))
    started = first[0]
    shared = fetch_shared(store, KEYS[0], started.bundle_digest, started.device.kind, "r-third")
    revalidated = [m for m in shared.measured if m.revalidations]
    assert [
        (m.run_id, m.candidate_id, [f.speedup for f in m.revalidations]) for m in revalidated
    ] == [("r-first", "c001", [2.2])]
    ours = pool_by((m.source_hash, x) for m in shared.measured for x in _measurements(m))
    rows = queries.query(store, "SELECT * FROM source_estimates").to_pylist()
    assert len(rows) == len(ours) == 2
    for r in rows:
        e = ours[r["source_hash"]]
        assert e.measurements == r["measurements"]
        assert e.speedup == pytest.approx(r["pooled_speedup"], rel=1e-9)
        assert (e.ci_low, e.ci_high) == pytest.approx((r["ci_low"], r["ci_high"]), rel=1e-9)
    assert ours[_source_hash(SOURCES[0])].measurements == 3  # two decisions, one revalidation
