"""Known devices and their ceilings, each labelled measured or datasheet.

A measured ceiling is what a real kernel reached on that device (docs/PROFILING.md says where
and how); a datasheet ceiling is the vendor's peak. The roofline judges a kernel against the
measured ceiling when there is one (a kernel can reach it), the integrity tripwire against the
highest ceiling (nothing may exceed the hardware). A device we do not know, and the CPU, have
no ceilings: their throughput cannot be judged, and is never judged against a guess.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict


class CeilingSource(StrEnum):
    MEASURED = "measured"
    DATASHEET = "datasheet"


class Resource(StrEnum):
    """What a ceiling limits."""

    DRAM_BANDWIDTH = "dram_bandwidth"  # bytes/s, bytes read + written
    BF16_DENSE = "bf16_dense"  # flop/s, dense tensor-core bf16 (fp16 is the same on these parts)


RESOURCE_UNITS = {Resource.DRAM_BANDWIDTH: "bytes/s", Resource.BF16_DENSE: "flop/s"}


class Ceiling(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    resource: Resource
    value: float
    source: CeilingSource
    note: str = ""

    @property
    def unit(self) -> str:
        return RESOURCE_UNITS[self.resource]


class DeviceSpec(BaseModel):
    """A device as tlxdb knows it. Unknown quantities are None."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str  # "h200", "cpu", "unknown"
    name: str  # as the runtime reported it
    backend: str  # "cuda", "hip", "cpu", "unknown"
    sm_count: int | None = None
    compute_capability: str | None = None
    ceilings: list[Ceiling] = []

    def ceiling(self, resource: Resource) -> Ceiling | None:
        """The ceiling a kernel is judged against: measured when there is one, else datasheet."""
        candidates = [c for c in self.ceilings if c.resource == resource]
        measured = [c for c in candidates if c.source == CeilingSource.MEASURED]
        chosen = measured or candidates
        return chosen[0] if chosen else None

    def hard_limit(self, resource: Resource) -> Ceiling | None:
        """The highest ceiling of any source: what no correct kernel can exceed."""
        candidates = [c for c in self.ceilings if c.resource == resource]
        return max(candidates, key=lambda c: c.value) if candidates else None


def _c(resource: Resource, value: float, source: CeilingSource, note: str = "") -> Ceiling:
    return Ceiling(resource=resource, value=value, source=source, note=note)


_BW, _BF16 = Resource.DRAM_BANDWIDTH, Resource.BF16_DENSE
_M, _D = CeilingSource.MEASURED, CeilingSource.DATASHEET


def _nvidia(
    key: str, name: str, sms: int, cc: str, bw: float, bf16: float, *measured: Ceiling
) -> DeviceSpec:
    """A CUDA device with its datasheet DRAM bandwidth and dense bf16 peak (+ measured ones)."""
    datasheet = [_c(_BW, bw, _D), _c(_BF16, bf16, _D, "dense, without sparsity")]
    return DeviceSpec(
        key=key,
        name=name,
        backend="cuda",
        sm_count=sms,
        compute_capability=cc,
        ceilings=[*measured, *datasheet],
    )


# (required lower-case substrings of the device name, spec); the first match wins, so the
# more specific names come first.
_KNOWN: list[tuple[tuple[str, ...], DeviceSpec]] = [
    (
        ("h200",),
        _nvidia(
            "h200",
            "NVIDIA H200",
            132,
            "9.0",
            4.8e12,
            989e12,
            _c(_BW, 4.24e12, _M, "device-to-device copy, bytes read + written, 2026-11-30"),
            _c(_BF16, 765e12, _M, "torch.matmul bf16 4096^3, 2026-11-30; 693-790 on other runs"),
        ),
    ),
    (("h100", "pcie"), _nvidia("h100-pcie", "NVIDIA H100 PCIe", 114, "9.0", 2.0e12, 756e12)),
    (("h100",), _nvidia("h100-sxm", "NVIDIA H100 80GB HBM3", 132, "9.0", 3.35e12, 989e12)),
    (("a100", "40gb"), _nvidia("a100-40gb", "NVIDIA A100-SXM4-40GB", 108, "8.0", 1.555e12, 312e12)),
    (
        ("a100", "pcie"),
        _nvidia("a100-80gb-pcie", "NVIDIA A100 80GB PCIe", 108, "8.0", 1.935e12, 312e12),
    ),
    (("a100",), _nvidia("a100-80gb-sxm", "NVIDIA A100-SXM4-80GB", 108, "8.0", 2.039e12, 312e12)),
]

CPU = DeviceSpec(key="cpu", name="cpu", backend="cpu")


def lookup_device(name: str) -> DeviceSpec:
    """The spec for a device name as the runtime reports it (torch.cuda.get_device_name(),
    target.json's "device", "cpu"). An unknown name gives a spec with no ceilings."""
    lowered = name.strip().lower()
    if lowered in ("cpu", "") or lowered.startswith("cpu"):
        return CPU if lowered in ("cpu", "") else CPU.model_copy(update={"name": name})
    for needles, spec in _KNOWN:
        if all(n in lowered for n in needles):
            return spec.model_copy(update={"name": name})
    return DeviceSpec(key="unknown", name=name, backend="unknown")


def known_devices() -> list[DeviceSpec]:
    return [spec for _, spec in _KNOWN] + [CPU]
