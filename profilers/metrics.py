"""The one typed model for profile evidence.

Invariants:
- A metric whose value a tool could not read has value None, never 0.
- Values are held in canonical units: time in "us", sizes in "bytes", rates in "bytes/s" or
  "flop/s", percentages in "pct". `canonical_unit` is the only converter.
- A ProfileSummary is plain data; the optimizer turns each Metric into a tlxstore ProfileMetric
  field by field (same name, value, unit and source).
"""

from __future__ import annotations

import math
from enum import StrEnum

from pydantic import BaseModel, ConfigDict


class MetricSource(StrEnum):
    """Which tool produced a metric."""

    PROTON = "proton"
    NCU = "ncu"
    HARNESS = "harness"
    ROOFLINE = "roofline"


class Metric(BaseModel):
    """One normalized profile metric. value None means the tool could not read it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    value: float | None
    unit: str
    source: MetricSource


class KernelShare(BaseModel):
    """The time one kernel took within a profile, and its share of the profiled kernel time."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    count: int | None  # launches; None when the tool did not say
    time_us: float | None
    fraction: float | None  # of the summed kernel time; None when the total is unknown or 0


class ProfileSummary(BaseModel):
    """Everything one profile of one case says: metrics, attribution, diagnostics, raw files."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    metrics: list[Metric] = []
    attribution: list[KernelShare] = []  # heaviest first
    diagnostics: list[str] = []
    artifacts: list[str] = []  # absolute paths of raw files

    @property
    def kernel_names(self) -> list[str]:
        return [share.name for share in self.attribution]

    def metric(self, name: str, source: MetricSource | None = None) -> Metric | None:
        """The first metric called `name` (from `source`, when given)."""
        for m in self.metrics:
            if m.name == name and (source is None or m.source == source):
                return m
        return None

    def merged(self, other: ProfileSummary) -> ProfileSummary:
        """Both summaries' evidence; attribution is taken from self unless self has none."""
        return ProfileSummary(
            metrics=[*self.metrics, *other.metrics],
            attribution=self.attribution or other.attribution,
            diagnostics=[*self.diagnostics, *other.diagnostics],
            artifacts=list(dict.fromkeys([*self.artifacts, *other.artifacts])),
        )


def shares(times_us: dict[str, float | None], counts: dict[str, int | None]) -> list[KernelShare]:
    """Attribution from per-kernel times: fractions of the known total, heaviest first."""
    known = [t for t in times_us.values() if t is not None]
    total = sum(known) if len(known) == len(times_us) else None
    result = [
        KernelShare(
            name=name,
            count=counts.get(name),
            time_us=t,
            fraction=(t / total) if (t is not None and total) else None,
        )
        for name, t in times_us.items()
    ]
    return sorted(result, key=lambda s: -(s.time_us or 0.0))


# factor to the canonical unit, keyed by the lower-cased unit as tools print it
_UNIT_FACTORS: dict[str, tuple[float, str]] = {
    **{u: (1e-3, "us") for u in ("ns", "nsecond", "nseconds", "nanosecond")},
    **{u: (1.0, "us") for u in ("us", "usecond", "useconds", "microsecond")},
    **{u: (1e3, "us") for u in ("ms", "msecond", "mseconds", "millisecond")},
    **{u: (1e6, "us") for u in ("s", "second", "seconds")},
    **{u: (1.0, "bytes") for u in ("b", "byte", "bytes")},
    **{u: (1e3, "bytes") for u in ("kb", "kbyte", "kbytes")},
    **{u: (1e6, "bytes") for u in ("mb", "mbyte", "mbytes")},
    **{u: (1e9, "bytes") for u in ("gb", "gbyte", "gbytes")},
    **{u: (1e12, "bytes") for u in ("tb", "tbyte", "tbytes")},
    "kib": (1024.0, "bytes"),
    "mib": (1024.0**2, "bytes"),
    "gib": (1024.0**3, "bytes"),
    "byte/second": (1.0, "bytes/s"),
    "bytes/s": (1.0, "bytes/s"),
    "kbyte/second": (1e3, "bytes/s"),
    "mbyte/second": (1e6, "bytes/s"),
    "gbyte/second": (1e9, "bytes/s"),
    "tbyte/second": (1e12, "bytes/s"),
    "flop/s": (1.0, "flop/s"),
    "gflop/s": (1e9, "flop/s"),
    "tflop/s": (1e12, "flop/s"),
    "%": (1.0, "pct"),
    "pct": (1.0, "pct"),
    "percent": (1.0, "pct"),
}


def canonical_unit(value: float | None, unit: str) -> tuple[float | None, str]:
    """(value, unit) in the canonical unit; an unknown unit is kept as it is."""
    factor, canonical = _UNIT_FACTORS.get(unit.strip().lower(), (1.0, unit.strip()))
    if value is None:
        return None, canonical
    return value * factor, canonical


def unit_from_name(name: str) -> str:
    """The unit a harness key declares by its suffix (`median_us`, `dram_bytes`), else ""."""
    for suffix, unit in (
        ("_us", "us"),
        ("_ns", "ns"),
        ("_ms", "ms"),
        ("_bytes", "bytes"),
        ("_pct", "pct"),
        ("_percent", "pct"),
    ):
        if name.endswith(suffix):
            return unit
    return ""


def finite_number(raw: object) -> float | None:
    """raw as a finite float, or None (bools, strings, NaN and infinities are not numbers here)."""
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        return None
    value = float(raw)
    return value if math.isfinite(value) else None
