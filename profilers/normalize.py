"""Turn what a bundle's harness `profile()` returned into a typed ProfileSummary.

The result (docs/CONTRACT.md §1) is compact JSON keyed by tool: `{"proton": {...}, "ncu": {...}}`,
with raw files referenced by absolute path and unreadable metrics as null. Harnesses differ
in what they put under each tool, so this reads by shape, never by a fixed schema:

- a number is a metric; its unit comes from its key's suffix (`median_us`, `read_bytes`);
- `{"value": x, "unit": u}` is a metric with that unit; null (or a null value) is a metric
  with value None and a diagnostic, never 0;
- `metrics` holds metrics, `kernels` a list of `{"name", "time_us" | "time_ns", "count"}`,
  `artifacts` paths (a mapping or a list), `diagnostics` strings;
- nested mappings are read recursively (`wrapper.median_us`);
- anything else (strings, flags, lists) is kept as a diagnostic, shortened.

Keys outside the known tools are the harness's own metrics (source "harness"). When a tool
gives no kernels but references a `.hatchet` file that exists, the file is read. Odd input of
any kind gives diagnostics, never an exception.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from profilers.metrics import (
    Metric,
    MetricSource,
    ProfileSummary,
    canonical_unit,
    finite_number,
    shares,
    unit_from_name,
)
from profilers.proton import HATCHET_SUFFIX, read_hatchet

TOOL_SOURCES = {
    "proton": MetricSource.PROTON,
    "ncu": MetricSource.NCU,
    "native_profiler": MetricSource.NCU,
}
MAX_NOTE_CHARS = 200  # how much of a non-metric value a diagnostic keeps
_TIME_SUFFIXES = {"_ns": "_us", "_ms": "_us"}


class _Collected:
    def __init__(self) -> None:
        self.metrics: list[Metric] = []
        self.diagnostics: list[str] = []
        self.artifacts: list[str] = []
        self.kernels: dict[MetricSource, tuple[dict[str, float | None], dict[str, int | None]]] = {}


def normalize(result: object) -> ProfileSummary:
    """A ProfileSummary from a harness profile() result; never raises on odd input."""
    acc = _Collected()
    if not isinstance(result, Mapping):
        return ProfileSummary(
            diagnostics=[f"profile result is {type(result).__name__}, not an object"]
        )
    own = {k: v for k, v in result.items() if k not in TOOL_SOURCES}
    _read_tool(acc, "harness", own, MetricSource.HARNESS)
    for tool, source in TOOL_SOURCES.items():
        if tool not in result:
            continue
        section = result[tool]
        if section is None:
            acc.diagnostics.append(f"{tool}: null (the tool gave no result)")
        elif isinstance(section, Mapping):
            _read_tool(acc, tool, section, source)
        else:
            acc.diagnostics.append(f"{tool}: expected an object, got {_short(section)}")
    attribution = []
    for source in (MetricSource.PROTON, MetricSource.NCU, MetricSource.HARNESS):
        if source in acc.kernels and acc.kernels[source][0]:
            attribution = shares(*acc.kernels[source])
            break
    return ProfileSummary(
        metrics=acc.metrics,
        attribution=attribution,
        diagnostics=acc.diagnostics,
        artifacts=list(dict.fromkeys(acc.artifacts)),
    )


def _read_tool(
    acc: _Collected, tool: str, section: Mapping[Any, Any], source: MetricSource
) -> None:
    for key, value in section.items():
        key = str(key)
        if key == "diagnostics":
            _read_diagnostics(acc, tool, value)
        elif key == "artifacts":
            _read_artifacts(acc, tool, value)
        elif key == "kernels":
            _read_kernels(acc, tool, value, source)
        elif key == "metrics" and isinstance(value, Mapping):
            _walk(acc, tool, "", value, source)
        else:
            _walk(acc, tool, "", {key: value}, source)
    if source not in acc.kernels:
        for path in list(acc.artifacts):
            if (
                path.endswith(HATCHET_SUFFIX)
                and Path(path).is_file()
                and source == MetricSource.PROTON
            ):
                profile = read_hatchet(path)
                acc.diagnostics.extend(profile.diagnostics)
                times = {k.name: k.time_us for k in profile.kernels}
                acc.kernels[source] = (times, {k.name: k.count for k in profile.kernels})
                break


def _walk(
    acc: _Collected, tool: str, prefix: str, mapping: Mapping[Any, Any], source: MetricSource
) -> None:
    for raw_key, value in mapping.items():
        name = f"{prefix}{raw_key}"
        if value is None:
            acc.metrics.append(
                Metric(name=name, value=None, unit=unit_from_name(name), source=source)
            )
            acc.diagnostics.append(f"{tool}: {name} is null (the tool could not read it)")
        elif isinstance(value, Mapping) and "value" in value:
            raw = value.get("value")
            number = finite_number(raw)
            declared = value.get("unit")
            unit = declared if isinstance(declared, str) else unit_from_name(name)
            if number is None:
                acc.diagnostics.append(f"{tool}: {name} unreadable ({_short(raw)})")
            converted, canonical = canonical_unit(number, unit)
            acc.metrics.append(Metric(name=name, value=converted, unit=canonical, source=source))
        elif isinstance(value, Mapping):
            _walk(acc, tool, f"{name}.", value, source)
        elif finite_number(value) is not None:
            acc.metrics.append(_named_number(name, float(value), source))
        else:
            acc.diagnostics.append(f"{tool}: kept {name} = {_short(value)}")


def _named_number(name: str, value: float, source: MetricSource) -> Metric:
    unit = unit_from_name(name)
    if name.endswith("launches") or name.endswith("_count"):
        unit = "count"
    converted, canonical = canonical_unit(value, unit)
    for suffix, replacement in _TIME_SUFFIXES.items():
        if name.endswith(suffix):
            name = name[: -len(suffix)] + replacement
    return Metric(name=name, value=converted, unit=canonical, source=source)


def _read_diagnostics(acc: _Collected, tool: str, value: object) -> None:
    items = value if isinstance(value, list) else [value]
    for item in items:
        if item is None or item == "":
            continue
        text = item if isinstance(item, str) else _short(item)
        acc.diagnostics.append(text if text.startswith(f"{tool}:") else f"{tool}: {text}")


def _read_artifacts(acc: _Collected, tool: str, value: object) -> None:
    if isinstance(value, Mapping):
        paths = list(value.values())
    elif isinstance(value, list):
        paths = value
    else:
        paths = [value]
    for path in paths:
        if not isinstance(path, str) or not path:
            acc.diagnostics.append(f"{tool}: kept artifact that is not a path: {_short(path)}")
            continue
        if not Path(path).is_absolute():
            acc.diagnostics.append(f"{tool}: artifact path is not absolute: {path}")
        acc.artifacts.append(path)


def _read_kernels(acc: _Collected, tool: str, value: object, source: MetricSource) -> None:
    if not isinstance(value, list):
        acc.diagnostics.append(f"{tool}: kernels is not a list: {_short(value)}")
        return
    times, counts = acc.kernels.setdefault(source, ({}, {}))
    for entry in value:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            acc.diagnostics.append(
                f"{tool}: skipped a kernel entry without a name: {_short(entry)}"
            )
            continue
        name = entry["name"]
        time_us = finite_number(entry.get("time_us"))
        if time_us is None and finite_number(entry.get("time_ns")) is not None:
            time_us = float(entry["time_ns"]) / 1e3
        if time_us is None:
            acc.diagnostics.append(f"{tool}: kernel {name} has no readable time")
        count = finite_number(entry.get("count"))
        prev_t, prev_c = times.get(name, 0.0), counts.get(name, 0)
        times[name] = None if prev_t is None or time_us is None else prev_t + time_us
        counts[name] = None if prev_c is None or count is None else prev_c + int(count)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= MAX_NOTE_CHARS else text[: MAX_NOTE_CHARS - 3] + "..."
