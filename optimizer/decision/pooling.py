"""One estimate per source: repeated measurements pooled, never the best of them picked.

A source (its raw source hash) measured more than once under one measurement key and against one
baseline source, in one run or several, has one speedup with one 99% confidence interval. A
measurement is a speedup against the run's baseline with the 99% interval it was recorded with: a
DecisionMade that promoted or rejected a candidate, or a FinalistRevalidated. Speedups against
different baseline sources are in different units and are never pooled.

The estimate is the inverse-variance weighted mean of the log speedups. Each measurement's
standard error is read from its interval, taken as normal in log space:
se = (ln ci_high - ln ci_low) / (2 * Z_99), floored at MIN_LOG_SE (a zero-width interval, from
constant samples, is very precise, not infinitely so); its weight is 1 / se^2. The pooled
interval is exp(mean -/+ Z_99 / sqrt(sum of the weights)).

A measurement without an interval (an imported TLX agent run records a speedup alone; a
missing, non-positive or inverted interval counts as none) has no known precision. Where another
measurement of the source has an interval, it is set aside: counted in `set_aside`, not pooled.
Where none has one, the estimate is the geometric mean of the speedups, with no interval.

queries/views/source_estimates.sql computes the same in SQL; tests/optimizer/decision/
test_pooling.py holds the two equal.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Protocol, TypeVar

Z_99 = 2.5758  # the two-sided 99% quantile of the normal distribution
MIN_LOG_SE = 1e-3  # the smallest standard error of a log speedup a measurement is given

K = TypeVar("K", bound=Hashable)


class Measured(Protocol):
    """What pooling reads of a measurement: a speedup against the run's baseline and the 99%
    interval it was recorded with (None where none was). queries.models.Figure (a final
    revalidation the provider context carries) is one as it is."""

    @property
    def speedup(self) -> float: ...
    @property
    def ci_low(self) -> float | None: ...
    @property
    def ci_high(self) -> float | None: ...


@dataclass(frozen=True)
class Measurement:
    """One measured speedup against the run's baseline, with its 99% interval when recorded."""

    speedup: float
    ci_low: float | None = None
    ci_high: float | None = None


@dataclass(frozen=True)
class Estimate:
    """The pooled speedup of one source; ci_low/ci_high are None when no measurement had an
    interval. `measurements`: how many the figure pools; `set_aside`: measurements without an
    interval left out because others had one."""

    speedup: float
    ci_low: float | None
    ci_high: float | None
    measurements: int
    set_aside: int = 0


def log_se(m: Measured) -> float | None:
    """The standard error of ln(speedup) its interval implies, or None without a usable one."""
    lo, hi = m.ci_low, m.ci_high
    if lo is None or hi is None or not (0 < lo <= hi < math.inf):
        return None
    return max((math.log(hi) - math.log(lo)) / (2 * Z_99), MIN_LOG_SE)


def _valid(m: Measured) -> bool:
    return 0 < m.speedup < math.inf


def pool(measurements: Iterable[Measured]) -> Estimate | None:
    """The one estimate of these measurements (see the module doc); None when none has a
    positive finite speedup (such a figure measures nothing and is ignored)."""
    ms = [m for m in measurements if _valid(m)]
    if not ms:
        return None
    weighted = [(math.log(m.speedup), se) for m in ms if (se := log_se(m)) is not None]
    if not weighted:
        mean = sum(math.log(m.speedup) for m in ms) / len(ms)
        return Estimate(math.exp(mean), None, None, measurements=len(ms))
    total = sum(1.0 / se**2 for _, se in weighted)
    mean = sum(x / se**2 for x, se in weighted) / total
    half = Z_99 / math.sqrt(total)
    return Estimate(
        speedup=math.exp(mean),
        ci_low=math.exp(mean - half),
        ci_high=math.exp(mean + half),
        measurements=len(weighted),
        set_aside=len(ms) - len(weighted),
    )


def pool_by(measured: Iterable[tuple[K, Measured]]) -> dict[K, Estimate]:
    """One estimate per key (a source, a configuration) of (key, measurement) pairs; a key with
    no valid measurement has none."""
    groups: dict[K, list[Measured]] = {}
    for key, m in measured:
        groups.setdefault(key, []).append(m)
    return {k: e for k, ms in groups.items() if (e := pool(ms)) is not None}
