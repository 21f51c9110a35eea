"""NVML: the machine's state while a benchmark runs, and the environment a run measures in.

tlxdb reads NVIDIA's management library through the `pynvml` module of the nvidia-ml-py package,
an optional dependency (`pip install 'tlxdb[gpu]'`) imported only where a GPU is to be read, so a
CPU machine needs neither the package nor the driver. Everything tlxdb asks of NVML goes through
`Nvml` (one device): `reading()` (clocks, power, temperature, clocks event reasons, processes),
`environment()` (driver, persistence mode, application clocks, power limits) and `start_call()`.
Two implementations: `PynvmlDevice`, the real binding, and `RecordedNvml`, a recorded trace
replayed (the tests, and TLXDB_NVML_TRACE on a CPU).

A reading holds NVML's values as pynvml returns them: clocks in MHz, power in mW, temperature in
degrees C, the clocks event reasons as NVML's bit mask, and the compute and graphics processes on
the device with their pid and used memory (bytes; None where NVML cannot say). A value NVML
refuses to read (not supported on this part) is None, never 0.

`DeviceSampler.sampling()` wraps one harness call: one reading at its start, one every
SAMPLE_PERIOD_S on a thread while it runs, one at its end; `summarize` turns them into what
tlxdb records of the call (tlxstore.events.MachineSampled has the same fields). Reading never
raises on what a device refuses; what cannot be read at all is `NvmlUnavailable`, with why.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

SAMPLE_PERIOD_S = 0.05
"""20 readings a second while a harness call runs (the TLX agent's harness samples at 20 Hz).
Each reading is six NVML queries (about 0.1-1 ms together, driver-side); the thread sleeps between
them and holds the GIL only to store the values."""

REASON_BITS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
"""NVML's clocks event reasons (nvmlClocksEventReason*, formerly ClocksThrottleReason*) by bit."""

SELF = "self"  # a recorded trace's name for the pid of the process that reads it


class NvmlUnavailable(Exception):
    """NVML cannot be read here; the message says why (one line)."""


def reason_names(mask: int) -> list[str]:
    """The names of the reasons set in an NVML clocks event reason mask, lowest bit first."""
    names = []
    bit = 1
    while bit <= mask:
        if mask & bit:
            names.append(REASON_BITS.get(bit, f"bit_0x{bit:x}"))
        bit <<= 1
    return names


@dataclass(frozen=True)
class Reading:
    """One reading of a device, in pynvml's units (None: NVML could not say)."""

    t_s: float  # time.monotonic() when it was taken
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    power_mw: int | None = None
    temperature_c: int | None = None
    reasons: int | None = None  # clocks event reasons, NVML's bit mask
    processes: tuple[tuple[int, int | None], ...] = ()  # (pid, used memory bytes)


class Nvml(Protocol):
    """The calls tlxdb makes of NVML, for one device."""

    source: str  # "nvml" or "recorded"

    def reading(self) -> Reading:
        """Clocks, power, temperature, clocks event reasons and processes, now."""
        ...

    def environment(self) -> dict[str, Any]:
        """The device's settings as NVML reports them (see environment_report)."""
        ...

    def start_call(self) -> None:
        """A benchmark call starts (the real binding does nothing; a trace moves to its next
        call)."""
        ...


# ---- the real binding --------------------------------------------------------------------------


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


class PynvmlDevice:
    """One device through pynvml (the module, passed in: tests hand it a stand-in)."""

    source = "nvml"

    def __init__(self, pynvml: Any, handle: Any) -> None:
        self.nvml = pynvml
        self.handle = handle

    def _get(self, name: str, *args: Any) -> Any:
        """nvml.<name>(handle, *args), or None where NVML refuses it (not supported, no
        permission) or this binding lacks the call."""
        fn = getattr(self.nvml, name, None)
        if fn is None:
            return None
        try:
            return fn(self.handle, *args)
        except self.nvml.NVMLError:
            return None

    def _processes(self) -> tuple[tuple[int, int | None], ...]:
        seen: dict[int, int | None] = {}
        for name in (
            "nvmlDeviceGetComputeRunningProcesses",
            "nvmlDeviceGetGraphicsRunningProcesses",
        ):
            for p in self._get(name) or []:
                used = getattr(p, "usedGpuMemory", None)
                seen[int(p.pid)] = None if used is None else int(used)
        return tuple(sorted(seen.items()))

    def reading(self) -> Reading:
        n = self.nvml
        reasons = self._get("nvmlDeviceGetCurrentClocksEventReasons")
        if reasons is None:
            reasons = self._get("nvmlDeviceGetCurrentClocksThrottleReasons")
        return Reading(
            t_s=time.monotonic(),
            sm_clock_mhz=self._get("nvmlDeviceGetClockInfo", n.NVML_CLOCK_SM),
            mem_clock_mhz=self._get("nvmlDeviceGetClockInfo", n.NVML_CLOCK_MEM),
            power_mw=self._get("nvmlDeviceGetPowerUsage"),
            temperature_c=self._get("nvmlDeviceGetTemperature", n.NVML_TEMPERATURE_GPU),
            reasons=reasons,
            processes=self._processes(),
        )

    def environment(self) -> dict[str, Any]:
        n = self.nvml
        pci = self._get("nvmlDeviceGetPciInfo")
        try:
            driver = _text(n.nvmlSystemGetDriverVersion())
        except n.NVMLError:
            driver = None
        try:
            cuda = n.nvmlSystemGetCudaDriverVersion()
        except (n.NVMLError, AttributeError):
            cuda = None
        return {
            "name": _text(self._get("nvmlDeviceGetName")),
            "uuid": _text(self._get("nvmlDeviceGetUUID")),
            "pci_bus_id": _text(getattr(pci, "busId", None)),
            "driver_version": driver,
            "cuda_driver_version": cuda,
            "persistence_mode": self._get("nvmlDeviceGetPersistenceMode"),
            "applications_clock_sm_mhz": self._get(
                "nvmlDeviceGetApplicationsClock", n.NVML_CLOCK_SM
            ),
            "applications_clock_mem_mhz": self._get(
                "nvmlDeviceGetApplicationsClock", n.NVML_CLOCK_MEM
            ),
            "default_applications_clock_sm_mhz": self._get(
                "nvmlDeviceGetDefaultApplicationsClock", n.NVML_CLOCK_SM
            ),
            "default_applications_clock_mem_mhz": self._get(
                "nvmlDeviceGetDefaultApplicationsClock", n.NVML_CLOCK_MEM
            ),
            "max_clock_sm_mhz": self._get("nvmlDeviceGetMaxClockInfo", n.NVML_CLOCK_SM),
            "max_clock_mem_mhz": self._get("nvmlDeviceGetMaxClockInfo", n.NVML_CLOCK_MEM),
            "enforced_power_limit_mw": self._get("nvmlDeviceGetEnforcedPowerLimit"),
            "default_power_limit_mw": self._get("nvmlDeviceGetPowerManagementDefaultLimit"),
            "numa_node_id": self._get("nvmlDeviceGetNumaNodeId"),
        }

    def start_call(self) -> None:
        return None


@dataclass(frozen=True)
class Selector:
    """Which device a process uses, as far as it knows: the PCI bus id or UUID CUDA reports
    for it, else its index among the devices NVML lists (CUDA_VISIBLE_DEVICES' first entry
    when that is a number; NVML ignores the variable)."""

    pci_bus_id: str | None = None
    uuid: str | None = None
    index: int | None = None

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> Selector:
        """From CUDA_VISIBLE_DEVICES alone (a process without a CUDA context): its first entry,
        a number or a UUID; device 0 when unset. NVML numbers devices by PCI bus order, as CUDA
        does under CUDA_DEVICE_ORDER=PCI_BUS_ID (and for identical GPUs by default)."""
        first = environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
        if first.startswith(("GPU-", "MIG-")):
            return cls(uuid=first)
        return cls(index=int(first) if first.isdigit() else 0)


def _import_pynvml() -> Any:
    try:
        import pynvml
    except ImportError:
        raise NvmlUnavailable(
            "the nvidia-ml-py package (module pynvml) is not installed: pip install 'tlxdb[gpu]'"
        ) from None
    return pynvml


def open_device(selector: Selector, pynvml: Any | None = None) -> PynvmlDevice:
    """The device `selector` names, through pynvml; NvmlUnavailable with why where it cannot."""
    n = pynvml if pynvml is not None else _import_pynvml()
    try:
        n.nvmlInit()
    except n.NVMLError as e:
        raise NvmlUnavailable(f"NVML could not start: {e}") from None
    attempts: list[tuple[str, Any]] = []
    if selector.pci_bus_id:
        attempts.append(("nvmlDeviceGetHandleByPciBusId", selector.pci_bus_id))
    if selector.uuid:
        uuid = selector.uuid
        attempts.append(("nvmlDeviceGetHandleByUUID", uuid))
        if not uuid.startswith(("GPU-", "MIG-")):
            attempts.append(("nvmlDeviceGetHandleByUUID", f"GPU-{uuid}"))
    attempts.append(("nvmlDeviceGetHandleByIndex", selector.index or 0))
    failures = []
    for name, key in attempts:
        try:
            return PynvmlDevice(n, getattr(n, name)(key))
        except n.NVMLError as e:
            failures.append(f"{name}({key!r}): {e}")
    raise NvmlUnavailable("NVML found no such device: " + "; ".join(failures))


# ---- a recorded trace --------------------------------------------------------------------------


class RecordedNvml:
    """A trace of readings replayed, in the JSON form `record_trace` writes:
    `{"device": {environment()'s keys}, "calls": [[reading, ...], ...]}`, each reading
    `{"sm_clock_mhz", "mem_clock_mhz", "power_mw", "temperature_c", "reasons",
    "processes": [[pid, used_bytes], ...]}` in pynvml's units, a pid "self" standing for the
    process that reads it. Each benchmark call (start_call) takes the next call of the trace,
    from the first again after the last; within a call the readings repeat from its first."""

    source = "recorded"

    def __init__(self, trace: Mapping[str, Any]) -> None:
        calls = trace.get("calls")
        if not isinstance(calls, list) or not calls or not all(calls):
            raise NvmlUnavailable("the NVML trace holds no calls with readings")
        self.device = dict(trace.get("device") or {})
        self.calls: list[list[dict[str, Any]]] = calls
        self.call = -1
        self.index = 0

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> RecordedNvml:
        try:
            return cls(json.loads(Path(path).read_text()))
        except (OSError, ValueError) as e:
            raise NvmlUnavailable(f"cannot read the NVML trace {path}: {e}") from None

    def start_call(self) -> None:
        self.call = (self.call + 1) % len(self.calls)
        self.index = 0

    def reading(self) -> Reading:
        readings = self.calls[max(self.call, 0)]
        r = readings[self.index % len(readings)]
        self.index += 1
        me = os.getpid()
        return Reading(
            t_s=time.monotonic(),
            sm_clock_mhz=r.get("sm_clock_mhz"),
            mem_clock_mhz=r.get("mem_clock_mhz"),
            power_mw=r.get("power_mw"),
            temperature_c=r.get("temperature_c"),
            reasons=r.get("reasons"),
            processes=tuple(
                (me if pid == SELF else int(pid), used) for pid, used in r.get("processes", [])
            ),
        )

    def environment(self) -> dict[str, Any]:
        return dict(self.device)


def record_trace(
    nvml: Nvml, phases: list[tuple[str, float]], period_s: float = SAMPLE_PERIOD_S
) -> dict[str, Any]:
    """A trace (RecordedNvml's form) read from a live device: one call per (label, seconds)
    phase, sampled every period_s for that long; this process's pid written as "self"."""
    me = os.getpid()
    calls, labels = [], []
    for label, seconds in phases:
        end = time.monotonic() + seconds
        readings = []
        while True:
            r = nvml.reading()
            readings.append(
                {
                    "sm_clock_mhz": r.sm_clock_mhz,
                    "mem_clock_mhz": r.mem_clock_mhz,
                    "power_mw": r.power_mw,
                    "temperature_c": r.temperature_c,
                    "reasons": r.reasons,
                    "processes": [[SELF if pid == me else pid, used] for pid, used in r.processes],
                }
            )
            if time.monotonic() >= end:
                break
            time.sleep(period_s)
        calls.append(readings)
        labels.append(label)
    return {"device": nvml.environment(), "labels": labels, "calls": calls}


# ---- sampling one call -------------------------------------------------------------------------


def _process_name(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() or None
    except OSError:
        return None


def process_family(root: int) -> set[int]:
    """`root`, every process descended from it (children, grandchildren: a tlxdb run's own
    harness children, ncu and the children under it) and every process it descends from but
    init (pid 1): the script or notebook that started the run and waits for it. On the H200
    (benchmarks/results/h200_transfer_2026-12-04/) a benchmark script that had timed torch.matmul
    held a CUDA context while its next tlxdb run ran: as a neighbour it marked every call of that
    run and failed all 12 of its candidates unmeasured. Read from /proc; {root} where /proc
    cannot be read."""
    parents: dict[int, list[int]] = {}
    parent_of: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses; split after the last ")"
        fields = text[text.rfind(")") + 2 :].split()
        if len(fields) > 1:
            pid, ppid = int(stat.parent.name), int(fields[1])
            parents.setdefault(ppid, []).append(pid)
            parent_of[pid] = ppid
    family, todo = {root}, [root]
    while todo:
        for child in parents.get(todo.pop(), []):
            if child not in family:
                family.add(child)
                todo.append(child)
    up = parent_of.get(root)
    while up is not None and up > 1 and up not in family:
        family.add(up)
        up = parent_of.get(up)
    return family


def _quantity(values: list[float], how: Callable[[list[float]], float], scale: float = 1.0):
    return how(values) / scale if values else None


def summarize(
    readings: list[Reading],
    own_pids: set[int],
    source: str,
    name_of: Callable[[int], str | None] = _process_name,
) -> dict[str, Any]:
    """What one call's readings say (MachineSampled's fields): clocks (min, median, max),
    power (median, max; W), the hottest temperature, each clocks event reason with the number of
    readings it was set in, and every process on the device but `own_pids`, with the readings it
    was seen in and its largest memory use."""
    sm = [float(r.sm_clock_mhz) for r in readings if r.sm_clock_mhz is not None]
    mem = [float(r.mem_clock_mhz) for r in readings if r.mem_clock_mhz is not None]
    power = [float(r.power_mw) for r in readings if r.power_mw is not None]
    temps = [float(r.temperature_c) for r in readings if r.temperature_c is not None]
    reasons: dict[str, int] = {}
    others: dict[int, dict[str, Any]] = {}
    for r in readings:
        for name in reason_names(r.reasons or 0):
            reasons[name] = reasons.get(name, 0) + 1
        for pid, used in r.processes:
            if pid in own_pids:
                continue
            n = others.setdefault(pid, {"pid": pid, "used_memory_bytes": None, "readings": 0})
            n["readings"] += 1
            if used is not None:
                n["used_memory_bytes"] = max(used, n["used_memory_bytes"] or 0)
    neighbours = [{**n, "name": name_of(pid)} for pid, n in sorted(others.items())]
    times = [r.t_s for r in readings]
    return {
        "readings": len(readings),
        "duration_ms": (max(times) - min(times)) * 1e3 if times else 0.0,
        "sm_clock_min_mhz": _quantity(sm, min),
        "sm_clock_median_mhz": _quantity(sm, statistics.median),
        "sm_clock_max_mhz": _quantity(sm, max),
        "mem_clock_min_mhz": _quantity(mem, min),
        "mem_clock_median_mhz": _quantity(mem, statistics.median),
        "power_median_w": _quantity(power, statistics.median, 1e3),
        "power_max_w": _quantity(power, max, 1e3),
        "temperature_max_c": _quantity(temps, max),
        "reasons": reasons,
        "neighbours": neighbours,
        "source": source,
    }


@dataclass
class DeviceSampler:
    """The sampler of one process (a harness child) on one device.

    Its own run is told apart from neighbours by pid: this process and the whole process family
    of its parent, the tlxdb run (its other harness children, an ncu child prestarted for the
    next candidate, which holds a CUDA context while this one is timed), read again only when a
    pid shows up that is neither in it nor already found outside it (a neighbour that stays
    costs no /proc scan per call). Where NVML reports pids of another PID namespace (a container),
    the process's own pid is never seen: then the one process on the device at its first
    reading, if there is exactly one, is taken to be itself."""

    nvml: Nvml
    own_pids: set[int] = field(default_factory=lambda: {os.getpid(), os.getppid()})
    period_s: float = SAMPLE_PERIOD_S
    family_root: int = field(default_factory=os.getppid)
    _identified: bool = False
    _strangers: set[int] = field(default_factory=set)  # pids found outside the family

    def _identify(self, first: Reading) -> None:
        if self._identified:
            return
        self._identified = True
        pids = {pid for pid, _ in first.processes}
        if not pids & self.own_pids and len(pids) == 1:
            self.own_pids |= pids

    @contextmanager
    def sampling(self) -> Iterator[dict[str, Any]]:
        """Sample while the body runs; the yielded dict is filled with summarize()'s fields
        when it ends."""
        self.nvml.start_call()
        readings = [self.nvml.reading()]
        self._identify(readings[0])
        stop = threading.Event()

        def run() -> None:
            while not stop.wait(self.period_s):
                try:
                    readings.append(self.nvml.reading())
                except Exception:  # noqa: BLE001 - a device that stops answering ends sampling
                    return

        thread = threading.Thread(target=run, name="tlxdb-nvml", daemon=True)
        out: dict[str, Any] = {}
        thread.start()
        try:
            yield out
        finally:
            stop.set()
            thread.join()
            readings.append(self.nvml.reading())
            seen = {pid for r in readings for pid, _ in r.processes}
            if seen - self.own_pids - self._strangers:  # a pid not yet placed: read /proc once
                self.own_pids |= process_family(self.family_root)
                self._strangers |= seen - self.own_pids
            out.update(summarize(readings, self.own_pids, self.nvml.source))


# ---- the environment of a run ------------------------------------------------------------------


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _sysfs_bus_id(bus_id: str) -> str:
    """NVML's "00000000:19:00.0" as sysfs names it ("0000:19:00.0")."""
    domain, _, rest = bus_id.partition(":")
    return f"{domain[-4:]}:{rest}".lower()


def host_environment(
    pci_bus_id: str | None, sysfs: Path = Path("/sys"), cpus: set[int] | None = None
) -> dict[str, Any]:
    """What the operating system says: the NUMA node of the GPU's PCI device (None where sysfs
    does not say, or says -1), the CPUs this process may run on, and their frequency governors
    (the distinct ones, comma-joined; None where cpufreq is absent, as in most VMs)."""
    numa = None
    if pci_bus_id:
        text = _read(sysfs / "bus" / "pci" / "devices" / _sysfs_bus_id(pci_bus_id) / "numa_node")
        if text is not None and text.lstrip("-").isdigit() and int(text) >= 0:
            numa = int(text)
    if cpus is None:
        cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    governors = {
        g
        for cpu in cpus
        if (
            g := _read(
                sysfs / "devices" / "system" / "cpu" / f"cpu{cpu}" / "cpufreq" / "scaling_governor"
            )
        )
    }
    return {
        "gpu_numa_node": numa,
        "cpu_affinity": sorted(cpus) or None,
        "cpu_governor": ",".join(sorted(governors)) or None,
    }


def _mhz(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and value > 0 else None


def _watts(value: Any) -> float | None:
    return float(value) / 1e3 if isinstance(value, int | float) and value > 0 else None


def environment_report(
    nvml: Nvml | None,
    unavailable: str | None = None,
    sysfs: Path = Path("/sys"),
    cpus: set[int] | None = None,
) -> dict[str, Any]:
    """The environment of a run (RunEnvironment's fields): the GPU's driver, persistence mode,
    application clocks, power limit and NUMA node, the process's CPU affinity and the CPUs'
    governor. What cannot be read is None; with no device, `unavailable` says why."""
    raw = nvml.environment() if nvml is not None else {}
    cuda = raw.get("cuda_driver_version")
    if isinstance(cuda, int) and cuda > 0:
        cuda = f"{cuda // 1000}.{cuda % 1000 // 10}"
    persistence = raw.get("persistence_mode")
    numa_nvml = raw.get("numa_node_id")
    host = host_environment(raw.get("pci_bus_id"), sysfs, cpus)
    if isinstance(numa_nvml, int) and numa_nvml >= 0:
        host["gpu_numa_node"] = numa_nvml
    return {
        "source": None if nvml is None else nvml.source,
        "unavailable": unavailable,
        "gpu_name": raw.get("name"),
        "gpu_uuid": raw.get("uuid"),
        "pci_bus_id": raw.get("pci_bus_id"),
        "driver_version": raw.get("driver_version"),
        "cuda_driver_version": cuda if isinstance(cuda, str) else None,
        "persistence_mode": None if persistence is None else bool(persistence),
        "application_sm_clock_mhz": _mhz(raw.get("applications_clock_sm_mhz")),
        "application_mem_clock_mhz": _mhz(raw.get("applications_clock_mem_mhz")),
        "default_application_sm_clock_mhz": _mhz(raw.get("default_applications_clock_sm_mhz")),
        "max_sm_clock_mhz": _mhz(raw.get("max_clock_sm_mhz")),
        "power_limit_w": _watts(raw.get("enforced_power_limit_mw")),
        "default_power_limit_w": _watts(raw.get("default_power_limit_mw")),
        **host,
    }


def main(argv: list[str] | None = None) -> int:
    """`python -m profilers.nvml [--trace PATH] [--unavailable REASON]`: the environment of the
    device this process's CUDA_VISIBLE_DEVICES names, as one JSON line (run in a child with the
    harness's environment, so the CPU affinity is the harness child's)."""
    args = list(sys.argv[1:] if argv is None else argv)
    trace = args[args.index("--trace") + 1] if "--trace" in args else None
    reason = args[args.index("--unavailable") + 1] if "--unavailable" in args else None
    nvml: Nvml | None = None
    try:
        if trace:
            nvml = RecordedNvml.load(trace)
        elif reason is None:
            nvml = open_device(Selector.from_environment(os.environ))
    except NvmlUnavailable as e:
        reason = str(e)
    print(json.dumps(environment_report(nvml, reason)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
