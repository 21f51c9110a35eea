"""Proton: read a `.hatchet` tree into per-kernel time, and collect one around a callable.

The `.hatchet` file Proton (`triton.profiler`, data="tree") writes is a JSON list:
`[root, devices]`. Each node is `{"frame": {"name", "type"}, "metrics": {...}, "children": [...]}`;
a GPU kernel node carries `"time (ns)"`, `"count"`, `"device_id"` and `"device_type"` in its
metrics; scope nodes carry none of those. Kernels launched by Proton's own launch-metadata
hook sit under a `__proton_launch_metadata` scope and are not the user's work. `devices` maps
device type to device id to `{"arch", "num_sms", "clock_rate" (kHz), "memory_clock_rate" (kHz),
"bus_width" (bits)}`.

Reading never raises on odd input: what cannot be read becomes a diagnostic.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from profilers.metrics import (
    KernelShare,
    Metric,
    MetricSource,
    ProfileSummary,
    finite_number,
    shares,
)

METADATA_SCOPE = "__proton_launch_metadata"
TIME_KEY = "time (ns)"
HATCHET_SUFFIX = ".hatchet"
NO_KERNEL = "proton: the profile holds no GPU kernel"


class ProtonDevice(BaseModel):
    """One device record of a hatchet file."""

    model_config = ConfigDict(frozen=True)

    device_type: str
    device_id: str
    arch: str | None = None
    num_sms: int | None = None
    clock_rate_khz: float | None = None
    memory_clock_rate_khz: float | None = None
    bus_width_bits: int | None = None


class ProtonProfile(BaseModel):
    """What a hatchet tree says: per-kernel time, the devices, and what could not be read."""

    model_config = ConfigDict(frozen=True)

    kernels: list[KernelShare] = []
    devices: list[ProtonDevice] = []
    diagnostics: list[str] = []

    @property
    def total_time_us(self) -> float | None:
        times = [k.time_us for k in self.kernels]
        if not times or any(t is None for t in times):
            return None
        return sum(t for t in times if t is not None)

    @property
    def launches(self) -> int | None:
        counts = [k.count for k in self.kernels]
        if not counts or any(c is None for c in counts):
            return None
        return sum(c for c in counts if c is not None)

    def summary(self, artifacts: list[str] | None = None) -> ProfileSummary:
        metrics = [
            Metric(
                name="kernel_time_us",
                value=self.total_time_us,
                unit="us",
                source=MetricSource.PROTON,
            ),
            Metric(
                name="kernel_launches",
                value=None if self.launches is None else float(self.launches),
                unit="count",
                source=MetricSource.PROTON,
            ),
        ]
        for k in self.kernels:
            metrics.append(
                Metric(
                    name=f"kernel_time_us:{k.name}",
                    value=k.time_us,
                    unit="us",
                    source=MetricSource.PROTON,
                )
            )
        diagnostics = list(self.diagnostics)
        if not self.kernels:
            diagnostics.append(NO_KERNEL)
        return ProfileSummary(
            metrics=metrics,
            attribution=self.kernels,
            diagnostics=diagnostics,
            artifacts=artifacts or [],
        )

    def compact(self, hatchet_path: str | None) -> dict[str, Any]:
        """The JSON a harness returns under "proton" (docs/CONTRACT.md §1)."""
        return {
            "kernel_time_us": self.total_time_us,
            "kernel_launches": self.launches,
            "kernels": [k.model_dump() for k in self.kernels],
            "artifacts": {"hatchet": hatchet_path} if hatchet_path else {},
            "diagnostics": list(self.diagnostics) + ([] if self.kernels else [NO_KERNEL]),
        }


def parse_hatchet(data: Any) -> ProtonProfile:
    """Per-kernel time (summed over scopes and launches) and devices from a loaded hatchet tree."""
    diagnostics: list[str] = []
    if isinstance(data, dict):
        root, device_record = data, None
    elif isinstance(data, list) and data and isinstance(data[0], dict):
        root = data[0]
        device_record = data[1] if len(data) > 1 else None
    else:
        return ProtonProfile(
            diagnostics=["proton: a hatchet tree is a list [root, devices]; got something else"]
        )

    times: dict[str, float | None] = {}
    counts: dict[str, int | None] = {}
    stack: list[Any] = [root]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            diagnostics.append("proton: skipped a node that is not an object")
            continue
        frame = node.get("frame")
        name = frame.get("name") if isinstance(frame, dict) else None
        name = name if isinstance(name, str) else None
        if name is not None and (name == METADATA_SCOPE or name.startswith(METADATA_SCOPE + ":")):
            continue  # kernels Proton's launch hook ran for itself
        metrics = node.get("metrics")
        metrics = metrics if isinstance(metrics, dict) else {}
        if TIME_KEY in metrics and ("device_id" in metrics or "device_type" in metrics):
            _add_kernel(name, metrics, times, counts, diagnostics)
        children = node.get("children", [])
        if isinstance(children, list):
            stack.extend(reversed(children))
        else:
            diagnostics.append(f"proton: children of {name!r} is not a list")
    return ProtonProfile(
        kernels=shares(times, counts),
        devices=_devices(device_record, diagnostics),
        diagnostics=diagnostics,
    )


def _add_kernel(
    name: str | None,
    metrics: dict[str, Any],
    times: dict[str, float | None],
    counts: dict[str, int | None],
    diagnostics: list[str],
) -> None:
    if name is None:
        diagnostics.append("proton: a kernel node has no name; skipped")
        return
    time_ns = finite_number(metrics.get(TIME_KEY))
    if time_ns is None or time_ns < 0:
        diagnostics.append(
            f"proton: unreadable time for kernel {name!r}: {metrics.get(TIME_KEY)!r}"
        )
    raw_count = finite_number(metrics.get("count"))
    count = int(raw_count) if raw_count is not None and raw_count >= 0 else None
    if count is None:
        diagnostics.append(f"proton: unreadable launch count for kernel {name!r}")
    previous_time = times.get(name, 0.0)
    times[name] = (
        None
        if (previous_time is None or time_ns is None or time_ns < 0)
        else previous_time + time_ns / 1e3
    )
    previous_count = counts.get(name, 0)
    counts[name] = None if (previous_count is None or count is None) else previous_count + count


def _devices(record: Any, diagnostics: list[str]) -> list[ProtonDevice]:
    if record is None:
        return []
    if not isinstance(record, dict):
        diagnostics.append("proton: the device record is not an object")
        return []
    devices = []
    for device_type, by_id in record.items():
        if not isinstance(by_id, dict):
            continue
        for device_id, info in by_id.items():
            if not isinstance(info, dict):
                continue
            sms, bus = finite_number(info.get("num_sms")), finite_number(info.get("bus_width"))
            devices.append(
                ProtonDevice(
                    device_type=str(device_type),
                    device_id=str(device_id),
                    arch=str(info["arch"]) if "arch" in info else None,
                    num_sms=None if sms is None else int(sms),
                    clock_rate_khz=finite_number(info.get("clock_rate")),
                    memory_clock_rate_khz=finite_number(info.get("memory_clock_rate")),
                    bus_width_bits=None if bus is None else int(bus),
                )
            )
    return devices


def read_hatchet(path: str | Path) -> ProtonProfile:
    """parse_hatchet of a file; a missing or malformed file gives a diagnostic, not an error."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        return ProtonProfile(
            diagnostics=[f"proton: cannot read {path}: {type(exc).__name__}: {exc}"]
        )
    return parse_hatchet(data)


def collect(
    run: Callable[[], object],
    artifacts_dir: str | Path,
    name: str = "proton",
    synchronize: Callable[[], object] | None = None,
) -> dict[str, Any]:
    """Profile `run()` with Proton (hook="triton") and return `{"proton": {...}}` for a harness.

    The tree is written to `<artifacts_dir>/<name>.hatchet`. `synchronize` (default:
    torch.cuda.synchronize when CUDA is present) runs before the session is finalized, so that
    every launched kernel is recorded. A Proton that cannot start (no GPU driver) gives a
    diagnostic with no metrics; an exception from `run` itself propagates.
    """
    import triton.profiler as proton_api  # imported here: its import loads the Proton library

    directory = Path(artifacts_dir).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    base = directory / name
    try:
        session = proton_api.start(str(base), hook="triton")
    except Exception as exc:  # Proton raises bare RuntimeErrors when no driver is active
        return {
            "proton": ProtonProfile(diagnostics=[f"proton: could not start: {exc}"]).compact(None)
        }
    try:
        run()
        (synchronize or _default_synchronize)()
    finally:
        proton_api.finalize(session)
    hatchet = base.with_suffix(HATCHET_SUFFIX)
    return {"proton": read_hatchet(hatchet).compact(str(hatchet))}


def _default_synchronize() -> None:
    try:
        import torch
    except ImportError:
        return
    if torch.cuda.is_available():
        torch.cuda.synchronize()
