"""Nsight Compute: the command line, running it on a Python command, and reading its CSV.

ncu always runs with `--clock-control none`: tlxdb measures the GPU at the clocks it really
runs at and never changes them (and locked base clocks would make every ncu duration
disagree with the benchmark).

`--csv --page raw` output is: ncu's own `==PROF==` lines (and, without `--log-file`, the
program's stdout), then a header row (`"ID","Process ID",...,"Kernel Name",...,<metric>...`),
a units row (identifier columns empty, a unit under each metric), and one row per profiled
launch. `--page details` output is long instead: one row per launch and metric with
"Metric Name", "Metric Unit" and "Metric Value" columns; both are read. Values may carry
thousands separators ("10,240,000"); "n/a" or an empty cell means ncu could not read the
counter, which becomes None with a diagnostic, never 0.
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from profilers.metrics import Metric, MetricSource, ProfileSummary, canonical_unit, shares

DURATION = "gpu__time_duration.sum"
# the run's baseline kernel profiled right after a candidate's, in the candidate's own ncu process
# (optimizer.evaluation.ncu_child: BaselineKernel); the ncu veto compares the two
REFERENCE_DURATION = "reference_" + DURATION
DEFAULT_METRICS: tuple[str, ...] = (
    DURATION,
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "lts__t_sector_hit_rate.pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "launch__registers_per_thread",
)
SUMMARY_METRICS = DEFAULT_METRICS
# The deep set (the TLX profiling policy's): occupancy and its limiters, registers, spills (local
# memory traffic), the memory hierarchy, and why warps stalled.
DEEP_METRICS: tuple[str, ...] = (
    *DEFAULT_METRICS,
    "sm__maximum_warps_per_active_cycle_pct",
    "launch__occupancy_limit_registers",
    "launch__occupancy_limit_shared_mem",
    "launch__occupancy_limit_warps",
    "launch__occupancy_limit_blocks",
    "launch__block_size",
    "launch__grid_size",
    "smsp__sass_inst_executed_op_local_ld.sum",
    "smsp__sass_inst_executed_op_local_st.sum",
    "l1tex__t_sector_hit_rate.pct",
    "l1tex__throughput.avg.pct_of_peak_sustained_active",
    "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "lts__t_bytes.sum",
    "sm__sass_thread_inst_executed_op_ffma_pred_on.sum",
    "sm__sass_thread_inst_executed_op_fadd_pred_on.sum",
    "sm__sass_thread_inst_executed_op_fmul_pred_on.sum",
    *(
        f"smsp__average_warps_issue_stalled_{reason}_per_issue_active.ratio"
        for reason in (
            "long_scoreboard",
            "short_scoreboard",
            "barrier",
            "mio_throttle",
            "lg_throttle",
            "math_pipe_throttle",
            "wait",
            "not_selected",
            "no_instruction",
        )
    ),
)
FIXED_ARGS: tuple[str, ...] = ("--clock-control", "none")
_MISSING_METRIC = re.compile(r"Failed to find metric (?:regex:)?([A-Za-z0-9_.]+)")
IDENTIFIER_COLUMNS = frozenset(
    {
        "ID",
        "Process ID",
        "Process Name",
        "Host Name",
        "Kernel Name",
        "Function Name",
        "Context",
        "Stream",
        "Block Size",
        "Grid Size",
        "Device",
        "CC",
        "Section Name",
        "Metric Name",
        "Metric Unit",
        "Metric Value",
        "Rule Name",
        "Rule Type",
        "Rule Description",
        "Estimated Speedup Type",
        "Estimated Speedup",
    }
)
UNREADABLE = frozenset({"", "n/a", "na", "nan", "-", "(!) n/a"})
_THOUSANDS = re.compile(r"^[+-]?\d{1,3}(,\d{3})+(\.\d+)?([eE][+-]?\d+)?$")
PERMISSION_HINT = "ERR_NVGPUCTRPERM"


class NcuLaunch(BaseModel):
    """One profiled kernel launch and its metrics (canonical units)."""

    model_config = ConfigDict(frozen=True)

    launch_id: str
    kernel: str
    metrics: dict[str, Metric]  # every column; a cell that is not a number has value None
    unreadable: dict[str, str] = {}  # metric -> the cell text that was not a number


class NcuReport(BaseModel):
    """What one ncu CSV says, launch by launch."""

    model_config = ConfigDict(frozen=True)

    launches: list[NcuLaunch] = []
    diagnostics: list[str] = []

    def summary(
        self, requested: Sequence[str] = DEFAULT_METRICS, artifacts: list[str] | None = None
    ) -> ProfileSummary:
        """The requested metrics totalled over every launch (sums add; rates and percentages are
        time-weighted means) and attribution by duration per kernel. A requested metric that
        ncu did not report, or reported as something other than a number, is None."""
        diagnostics = list(self.diagnostics)
        if not self.launches:
            diagnostics.append("ncu: no kernel launch was profiled")
        metrics = []
        for name in dict.fromkeys(requested):
            for la in self.launches:
                if name in la.unreadable:
                    cell = la.unreadable[name] or "empty"
                    diagnostics.append(
                        f"ncu: {name} unreadable ({cell!r}) for launch {la.launch_id} ({la.kernel})"
                    )
                elif name not in la.metrics:
                    diagnostics.append(
                        f"ncu: {name} not reported for launch {la.launch_id} ({la.kernel})"
                    )
            metrics.append(_aggregate(name, self.launches))
        kernels = list(dict.fromkeys(la.kernel for la in self.launches))
        times = {
            k: _aggregate(DURATION, [la for la in self.launches if la.kernel == k]).value
            for k in kernels
        }
        counts: dict[str, int | None] = {
            k: sum(1 for la in self.launches if la.kernel == k) for k in kernels
        }
        return ProfileSummary(
            metrics=metrics,
            attribution=shares(times, counts),
            diagnostics=diagnostics,
            artifacts=artifacts or [],
        )


def _aggregate(name: str, launches: Sequence[NcuLaunch]) -> Metric:
    found = [la.metrics.get(name) for la in launches]
    unit = next((m.unit for m in found if m is not None), "")
    values = [None if m is None else m.value for m in found]
    if not values or any(v is None for v in values):
        return Metric(name=name, value=None, unit=unit, source=MetricSource.NCU)
    known = [v for v in values if v is not None]
    if name.endswith(".sum") and "pct" not in name and "per_second" not in name:
        value = sum(known)
    elif name.endswith(".max"):
        value = max(known)
    elif name.endswith(".min"):
        value = min(known)
    else:
        durations = [la.metrics.get(DURATION) for la in launches]
        weights = [d.value if d is not None and d.value else None for d in durations]
        if all(w is not None for w in weights):
            w = [x for x in weights if x is not None]
            value = sum(v * x for v, x in zip(known, w, strict=True)) / sum(w)
        else:
            value = sum(known) / len(known)
    return Metric(name=name, value=value, unit=unit, source=MetricSource.NCU)


def parse_number(cell: str) -> float | None:
    """A metric cell as a float: thousands separators dropped; "n/a" and blanks are None."""
    text = cell.strip()
    if text.lower() in UNREADABLE:
        return None
    if _THOUSANDS.match(text):
        text = text.replace(",", "")
    try:
        return float(text)
    except ValueError:
        return None


def parse_csv(text: str) -> NcuReport:
    """An NcuReport from ncu's `--csv` output (`--page raw` or `--page details`)."""
    lines = text.splitlines()
    diagnostics = [ln.strip() for ln in lines if ln.startswith("==ERROR==")]
    if PERMISSION_HINT in text:
        diagnostics.append(
            "ncu: no permission to read GPU performance counters (ERR_NVGPUCTRPERM); "
            "an administrator must allow profiling for non-root users"
        )
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID",')), None)
    if start is None:
        return NcuReport(diagnostics=[*diagnostics, "ncu: no CSV header in the output"])
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header = rows[0]
    if "Metric Name" in header and "Metric Value" in header:
        return _parse_long(header, rows[1:], diagnostics)
    return _parse_wide(header, rows[1:], diagnostics)


def _kernel_column(header: list[str]) -> int | None:
    for name in ("Kernel Name", "Function Name"):
        if name in header:
            return header.index(name)
    return None


def _launch(launch_id: str, kernel: str, cells: list[tuple[str, str, str]]) -> NcuLaunch:
    """A launch from (metric, unit, cell) triples."""
    metrics, unreadable = {}, {}
    for name, unit, cell in cells:
        raw = parse_number(cell)
        if raw is None:
            unreadable[name] = cell.strip()
        value, canonical = canonical_unit(raw, unit)
        metrics[name] = Metric(name=name, value=value, unit=canonical, source=MetricSource.NCU)
    return NcuLaunch(launch_id=launch_id, kernel=kernel, metrics=metrics, unreadable=unreadable)


def _parse_wide(header: list[str], rows: list[list[str]], diagnostics: list[str]) -> NcuReport:
    kernel_col = _kernel_column(header)
    metric_cols = [i for i, name in enumerate(header) if name not in IDENTIFIER_COLUMNS]
    units = [""] * len(header)
    if rows and rows[0] and rows[0][0].strip() == "":
        units = rows[0] + [""] * (len(header) - len(rows[0]))
        rows = rows[1:]
    launches = []
    for row in rows:
        if len(row) != len(header):
            diagnostics.append(
                f"ncu: skipped a row of {len(row)} cells under a header of {len(header)}"
            )
            continue
        kernel = row[kernel_col] if kernel_col is not None else "?"
        cells = [(header[i], units[i], row[i]) for i in metric_cols]
        launches.append(_launch(row[0], kernel, cells))
    return NcuReport(launches=launches, diagnostics=diagnostics)


def _parse_long(header: list[str], rows: list[list[str]], diagnostics: list[str]) -> NcuReport:
    kernel_col = _kernel_column(header)
    name_col, value_col = header.index("Metric Name"), header.index("Metric Value")
    unit_col = header.index("Metric Unit") if "Metric Unit" in header else None
    by_launch: dict[str, tuple[str, list[tuple[str, str, str]]]] = {}
    for row in rows:
        if len(row) < len(header):
            diagnostics.append(
                f"ncu: skipped a row of {len(row)} cells under a header of {len(header)}"
            )
            continue
        kernel = row[kernel_col] if kernel_col is not None else "?"
        unit = row[unit_col] if unit_col is not None else ""
        by_launch.setdefault(row[0], (kernel, []))[1].append((row[name_col], unit, row[value_col]))
    launches = [_launch(i, kernel, cells) for i, (kernel, cells) in by_launch.items()]
    return NcuReport(launches=launches, diagnostics=diagnostics)


def prefix(
    log_file: str | Path,
    metrics: Sequence[str] = DEFAULT_METRICS,
    kernel_regex: str | None = None,
    launch_skip: int | None = None,
    launch_count: int | None = None,
    ncu: str = "ncu",
    profile_from_start: bool = True,
) -> list[str]:
    """The ncu argv up to the program it profiles, writing its CSV to `log_file`.
    `profile_from_start=False`: only launches inside the program's cudaProfilerStart/Stop
    ranges are profiled."""
    if not metrics:
        raise ValueError("ncu needs at least one metric")
    argv = [ncu, *FIXED_ARGS, "--target-processes", "all", "--csv", "--page", "raw"]
    argv += ["--print-units", "base", "--metrics", ",".join(metrics), "--log-file", str(log_file)]
    if kernel_regex:
        argv += ["--kernel-name", f"regex:{kernel_regex}"]
    if launch_skip is not None:
        argv += ["--launch-skip", str(launch_skip)]
    if launch_count is not None:
        argv += ["--launch-count", str(launch_count)]
    if not profile_from_start:
        argv += ["--profile-from-start", "off"]
    return argv


def command(target_argv: Sequence[str], log_file: str | Path, **options: Any) -> list[str]:
    """The ncu argv that profiles `target_argv`, writing its CSV to `log_file` (`options`: those
    of `prefix`)."""
    if not target_argv:
        raise ValueError("ncu needs a command to profile")
    return [*prefix(log_file, **options), *target_argv]


def missing_metrics(text: str) -> list[str]:
    """The metrics ncu's output says it does not know on this GPU ("Failed to find metric")."""
    return list(dict.fromkeys(_MISSING_METRIC.findall(text)))


class NcuRun(BaseModel):
    """One ncu run: its command, how it ended, and what its CSV said."""

    model_config = ConfigDict(frozen=True)

    command: list[str]
    returncode: int | None  # None: it did not run or was killed at the timeout
    timed_out: bool
    report: NcuReport
    requested: list[str]
    diagnostics: list[str] = []
    artifacts: dict[str, str] = {}  # kind -> absolute path

    def summary(self) -> ProfileSummary:
        s = self.report.summary(self.requested, artifacts=list(self.artifacts.values()))
        return s.model_copy(update={"diagnostics": [*self.diagnostics, *s.diagnostics]})

    def compact(self) -> dict[str, Any]:
        """The JSON a harness returns under "ncu" (docs/CONTRACT.md §1)."""
        s = self.summary()
        return {
            "metrics": {m.name: {"value": m.value, "unit": m.unit} for m in s.metrics},
            "kernels": [k.model_dump() for k in s.attribution],
            "launches": len(self.report.launches),
            "artifacts": dict(self.artifacts),
            "diagnostics": s.diagnostics,
        }


def run(
    target_argv: Sequence[str],
    artifacts_dir: str | Path,
    timeout_s: float,
    metrics: Sequence[str] = DEFAULT_METRICS,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    kernel_regex: str | None = None,
    launch_skip: int | None = None,
    launch_count: int | None = None,
    ncu: str = "ncu",
    name: str = "ncu",
) -> NcuRun:
    """Profile a command under ncu in its own process group, killed whole at `timeout_s`.

    Writes `<name>.csv` (ncu's log) and `<name>.stdout.txt` under `artifacts_dir`. A missing
    ncu, a timeout or a failed run is reported in diagnostics; it never raises for those.
    """
    directory = Path(artifacts_dir).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    log = directory / f"{name}.csv"
    log.unlink(missing_ok=True)
    argv = command(
        target_argv,
        log,
        metrics=metrics,
        kernel_regex=kernel_regex,
        launch_skip=launch_skip,
        launch_count=launch_count,
        ncu=ncu,
    )
    requested = list(metrics)
    executable = shutil.which(ncu)
    if executable is None:
        return NcuRun(
            command=argv,
            returncode=None,
            timed_out=False,
            report=NcuReport(),
            requested=requested,
            diagnostics=[f"ncu: {ncu!r} not found on PATH"],
        )
    proc = subprocess.Popen(
        [executable, *argv[1:]],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=None if env is None else dict(env),
        cwd=cwd,
        start_new_session=True,
        text=True,
    )
    timed_out = False
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
    stdout_path = directory / f"{name}.stdout.txt"
    stdout_path.write_text(out or "")
    artifacts = {"stdout": str(stdout_path)}
    diagnostics = []
    if timed_out:
        diagnostics.append(f"ncu: killed after {timeout_s:g} s")
    elif proc.returncode != 0:
        diagnostics.append(f"ncu: exited with status {proc.returncode}")
    if log.exists():
        artifacts["csv"] = str(log)
        text = log.read_text(errors="replace")
    else:
        diagnostics.append("ncu: wrote no log file; reading its stdout instead")
        text = out or ""
    return NcuRun(
        command=argv,
        returncode=None if timed_out else proc.returncode,
        timed_out=timed_out,
        report=parse_csv(text),
        requested=requested,
        diagnostics=diagnostics,
        artifacts=artifacts,
    )
