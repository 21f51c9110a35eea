"""The roofline: how close a measured time comes to the device's ceilings.

Inputs are what the harness or case declares (bytes moved to and from DRAM, floating-point
operations) and a measured time in microseconds. Unknown inputs stay None all the way through.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from profilers.hardware import Ceiling, DeviceSpec, Resource
from profilers.metrics import Metric, MetricSource

# A kernel reaching this fraction of one ceiling is bound by it when the other amount is unknown.
DOMINANT_FRACTION = 0.5


class Bound(StrEnum):
    MEMORY = "memory"
    COMPUTE = "compute"
    UNKNOWN = "unknown"


class RooflinePoint(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    time_us: float
    bytes_moved: float | None
    flops: float | None
    achieved_bytes_per_s: float | None
    achieved_flop_per_s: float | None
    bandwidth_ceiling: Ceiling | None
    compute_ceiling: Ceiling | None
    bandwidth_fraction: float | None  # of the bandwidth ceiling
    compute_fraction: float | None  # of the compute ceiling
    arithmetic_intensity: float | None  # flop per byte
    ridge_intensity: float | None  # flop per byte where the two ceilings meet
    bound: Bound

    def metrics(self) -> list[Metric]:
        """The point as roofline metrics (None where unknown)."""
        rows = [
            ("achieved_bytes_per_s", self.achieved_bytes_per_s, "bytes/s"),
            ("achieved_flop_per_s", self.achieved_flop_per_s, "flop/s"),
            ("bandwidth_fraction", self.bandwidth_fraction, "ratio"),
            ("compute_fraction", self.compute_fraction, "ratio"),
            ("arithmetic_intensity", self.arithmetic_intensity, "flop/byte"),
        ]
        return [Metric(name=n, value=v, unit=u, source=MetricSource.ROOFLINE) for n, v, u in rows]


def _check_time(time_us: float) -> None:
    if not time_us > 0:
        raise ValueError(f"time_us must be positive, got {time_us}")


def _rate(amount: float | None, time_us: float) -> float | None:
    return None if amount is None else amount / (time_us * 1e-6)


def _fraction(achieved: float | None, ceiling: Ceiling | None) -> float | None:
    return None if achieved is None or ceiling is None else achieved / ceiling.value


def roofline(
    device: DeviceSpec,
    time_us: float,
    bytes_moved: float | None = None,
    flops: float | None = None,
    compute: Resource = Resource.BF16_DENSE,
) -> RooflinePoint:
    """Achieved rates, their fractions of the device's ceilings, and which ceiling binds.

    With bytes and flops and both ceilings, the bound is decided by arithmetic intensity against
    the ridge point. With one of the two amounts only (a memory-bound kernel whose harness
    declares no flops, profiled by ncu's summary set, which counts no flops), the kernel is
    bound by that resource when it reaches at least DOMINANT_FRACTION of its ceiling: nothing
    else can be using more of the time. Otherwise the bound is UNKNOWN.
    """
    _check_time(time_us)
    bw, fl = device.ceiling(Resource.DRAM_BANDWIDTH), device.ceiling(compute)
    achieved_bw, achieved_fl = _rate(bytes_moved, time_us), _rate(flops, time_us)
    bw_fraction, fl_fraction = _fraction(achieved_bw, bw), _fraction(achieved_fl, fl)
    intensity = flops / bytes_moved if flops is not None and bytes_moved else None
    ridge = fl.value / bw.value if fl is not None and bw is not None else None
    if intensity is not None and ridge is not None:
        bound = Bound.MEMORY if intensity < ridge else Bound.COMPUTE
    elif flops is None and bw_fraction is not None and bw_fraction >= DOMINANT_FRACTION:
        bound = Bound.MEMORY
    elif bytes_moved is None and fl_fraction is not None and fl_fraction >= DOMINANT_FRACTION:
        bound = Bound.COMPUTE
    else:
        bound = Bound.UNKNOWN
    return RooflinePoint(
        time_us=time_us,
        bytes_moved=bytes_moved,
        flops=flops,
        achieved_bytes_per_s=achieved_bw,
        achieved_flop_per_s=achieved_fl,
        bandwidth_ceiling=bw,
        compute_ceiling=fl,
        bandwidth_fraction=bw_fraction,
        compute_fraction=fl_fraction,
        arithmetic_intensity=intensity,
        ridge_intensity=ridge,
        bound=bound,
    )


class Implausibility(BaseModel):
    """A throughput above what the hardware can do."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    resource: Resource
    achieved: float
    limit: Ceiling
    ratio: float  # achieved / limit
    message: str


def implausible(
    device: DeviceSpec,
    time_us: float,
    bytes_moved: float | None = None,
    flops: float | None = None,
    margin: float = 1.0,
    compute: Resource = Resource.BF16_DENSE,
) -> list[Implausibility]:
    """Each declared throughput that exceeds `margin` times the device's hard limit.

    Empty when nothing exceeds it, and also when the device has no ceilings or the amounts
    are unknown: what cannot be judged is not flagged. Bytes that stay in L2 can make a
    declared DRAM traffic look faster than DRAM; this is a tripwire for re-verification,
    not a verdict.
    """
    _check_time(time_us)
    found = []
    for resource, amount, unit in (
        (Resource.DRAM_BANDWIDTH, bytes_moved, "B/s"),
        (compute, flops, "FLOP/s"),
    ):
        limit = device.hard_limit(resource)
        achieved = _rate(amount, time_us)
        if limit is None or achieved is None or achieved <= margin * limit.value:
            continue
        ratio = achieved / limit.value
        found.append(
            Implausibility(
                resource=resource,
                achieved=achieved,
                limit=limit,
                ratio=ratio,
                message=(
                    f"{resource.value} {achieved:.3g} {unit} is {ratio:.2f}x the {device.name} "
                    f"{limit.source.value} limit {limit.value:.3g} {unit}"
                ),
            )
        )
    return found
