"""NVML sampling on recorded readings and through a stand-in for the pynvml module (no NVIDIA
driver here); the real module is tried where it can only fail: on this CPU machine it says why,
in one line. The values checked exactly are those of TRACE below, in the form of
tests/fixtures/machine/nvml_trace.json (which the replay tests read, whatever it holds)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from support.machine import NVML_TRACE

from profilers import nvml

REPO = Path(__file__).resolve().parents[2]


def _r(sm, power, reasons=0, others=()):
    return {"sm_clock_mhz": sm, "mem_clock_mhz": 3201, "power_mw": power, "temperature_c": 45,
            "reasons": reasons, "processes": [["self", 1 << 30], *others]}  # fmt: skip


TRACE = {
    "device": {
        "name": "NVIDIA H200", "pci_bus_id": "00000000:19:00.0", "driver_version": "580.159.04",
        "persistence_mode": 1, "applications_clock_sm_mhz": 1980, "applications_clock_mem_mhz": 3201,
        "enforced_power_limit_mw": 700000,
    },
    "calls": [
        [_r(1980, 412000), _r(1965, 455000), _r(1980, 431000)],  # quiet
        [_r(1755, 699000, 0x4), _r(1710, 700000, 0x4), _r(1740, 698000, 0x4)],  # power cap
        [_r(1980, 440000), _r(1155, 402000, 0x8), _r(1200, 398000, 0xC)],  # hardware slowdown
        [_r(1980, 412000)],  # quiet
        [_r(1980, 650000, 0, [[4242, 8 << 30]]), _r(1920, 690000, 0, [[4242, 8 << 30]]), _r(1905, 695000)],
    ],
}  # fmt: skip


def trace() -> dict:
    """The fixture trace (constructed, or an H200's recording: tests/fixtures/machine)."""
    return json.loads(NVML_TRACE.read_text())


def test_reason_names_read_nvmls_bit_mask():
    assert nvml.reason_names(0) == []
    assert nvml.reason_names(0x4 | 0x8) == ["sw_power_cap", "hw_slowdown"]
    assert nvml.reason_names(0x20 | 0x40 | 0x80) == [
        "sw_thermal_slowdown",
        "hw_thermal_slowdown",
        "hw_power_brake_slowdown",
    ]
    assert nvml.reason_names(0x1000) == ["bit_0x1000"]


def test_a_recorded_trace_gives_each_benchmark_call_the_next_call_of_the_trace():
    t = trace()
    rec = nvml.RecordedNvml(t)
    seen = []
    for _ in range(len(t["calls"]) + 1):
        rec.start_call()
        seen.append([rec.reading().sm_clock_mhz for _ in range(len(t["calls"][rec.call]) + 1)])
    first = [r["sm_clock_mhz"] for r in t["calls"][0]]
    assert seen[0] == [*first, first[0]]  # within a call the readings repeat from its first
    assert seen[-1] == seen[0]  # after the last call, the first again
    rec.start_call()
    assert all(pid == os.getpid() for pid, _ in rec.reading().processes[:1])  # "self"


def test_sampling_a_call_reads_at_its_start_every_period_and_at_its_end():
    rec = nvml.RecordedNvml(TRACE)
    sampler = nvml.DeviceSampler(rec, period_s=0.02)
    with sampler.sampling() as quiet:
        time.sleep(0.1)
    assert quiet["readings"] >= 3 and quiet["source"] == "recorded"
    assert quiet["sm_clock_min_mhz"] == 1965 and quiet["sm_clock_max_mhz"] == 1980
    assert quiet["power_max_w"] == pytest.approx(455.0) and quiet["reasons"] == {}
    assert quiet["mem_clock_median_mhz"] == 3201 and quiet["temperature_max_c"] == 45
    assert quiet["neighbours"] == []  # the process itself is no neighbour
    with sampler.sampling() as capped:
        pass
    assert capped["readings"] == 2  # a call shorter than the period: its start and its end
    assert capped["reasons"] == {"sw_power_cap": 2} and capped["sm_clock_min_mhz"] == 1710
    with sampler.sampling() as throttled:
        pass
    assert throttled["reasons"] == {"hw_slowdown": 1} and throttled["sm_clock_min_mhz"] == 1155
    with sampler.sampling():  # the trace's fourth call, quiet
        pass
    with sampler.sampling() as shared:
        pass
    [neighbour] = shared["neighbours"]
    assert neighbour["pid"] == 4242 and neighbour["readings"] == 2
    assert neighbour["used_memory_bytes"] == 8 << 30


def test_a_process_of_another_pid_namespace_is_taken_for_itself_when_it_is_alone():
    """In a container NVML reports host pids: the one process on the GPU at the first reading
    is the sampler's own, and a second one seen later is a neighbour."""
    alone = {"sm_clock_mhz": 1980, "processes": [[77, 1 << 30]]}
    beside = {"sm_clock_mhz": 1980, "processes": [[77, 1 << 30], [88, 1 << 33]]}
    sampler = nvml.DeviceSampler(nvml.RecordedNvml({"calls": [[alone], [beside]]}))
    with sampler.sampling() as first:
        pass
    with sampler.sampling() as second:
        pass
    assert first["neighbours"] == []
    assert [n["pid"] for n in second["neighbours"]] == [88]


class FakePynvml:
    """A stand-in for the pynvml module, answering from one recorded reading and device record
    in pynvml's own shapes (ints, bytes for names, objects with pid/usedGpuMemory and busId);
    NVML refuses what `refused` names."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0

    class NVMLError(Exception):
        pass

    def __init__(self, refused: tuple[str, ...] = (), init_error: str | None = None) -> None:
        self.reading, self.device = TRACE["calls"][4][0], TRACE["device"]
        self.refused, self.init_error = refused, init_error
        self.handles: list[str] = []

    def _check(self, name: str) -> None:
        if name in self.refused:
            raise self.NVMLError("Not Supported")

    def nvmlInit(self) -> None:
        if self.init_error:
            raise self.NVMLError(self.init_error)

    def nvmlDeviceGetHandleByPciBusId(self, bus: str) -> str:
        self._check("pci")
        self.handles.append(f"pci {bus}")
        return "h"

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> str:
        self._check("uuid")
        self.handles.append(f"uuid {uuid}")
        return "h"

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:
        self.handles.append(f"index {index}")
        return "h"

    def nvmlDeviceGetClockInfo(self, h, kind):
        self._check("clock")
        return self.reading["sm_clock_mhz" if kind == 1 else "mem_clock_mhz"]

    def nvmlDeviceGetPowerUsage(self, h):
        self._check("power")
        return self.reading["power_mw"]

    def nvmlDeviceGetTemperature(self, h, sensor):
        return self.reading["temperature_c"]

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return self.reading["reasons"]

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return [SimpleNamespace(pid=4242, usedGpuMemory=8589934592)]

    def nvmlDeviceGetGraphicsRunningProcesses(self, h):
        return [SimpleNamespace(pid=4243, usedGpuMemory=None)]

    def nvmlSystemGetDriverVersion(self):
        return self.device["driver_version"].encode()

    def nvmlDeviceGetName(self, h):
        return self.device["name"].encode()

    def nvmlDeviceGetPciInfo(self, h):
        return SimpleNamespace(busId=self.device["pci_bus_id"].encode())

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return self.device["enforced_power_limit_mw"]

    def nvmlDeviceGetPersistenceMode(self, h):
        return self.device["persistence_mode"]

    def nvmlDeviceGetApplicationsClock(self, h, kind):
        self._check("applications_clock")
        return self.device[
            "applications_clock_sm_mhz" if kind == 1 else "applications_clock_mem_mhz"
        ]


def test_the_pynvml_binding_reads_every_call_and_leaves_what_nvml_refuses_null():
    fake = FakePynvml(refused=("power", "applications_clock"))
    device = nvml.open_device(nvml.Selector(pci_bus_id="0000:19:00.0"), fake)
    r = device.reading()
    assert (r.sm_clock_mhz, r.mem_clock_mhz, r.temperature_c) == (1980, 3201, 45)
    assert r.power_mw is None  # refused: unknown, never 0
    assert r.processes == ((4242, 8589934592), (4243, None))  # compute and graphics
    env = nvml.environment_report(device, sysfs=Path("/nonexistent"), cpus={0, 1})
    assert env["driver_version"] == "580.159.04" and env["gpu_name"] == "NVIDIA H200"
    assert env["pci_bus_id"] == "00000000:19:00.0" and env["persistence_mode"] is True
    assert env["power_limit_w"] == 700.0 and env["application_sm_clock_mhz"] is None
    assert env["default_power_limit_w"] is None  # this binding lacks the call: null too
    assert env["source"] == "nvml" and env["cpu_affinity"] == [0, 1]


def test_a_device_is_found_by_pci_bus_id_else_uuid_else_index():
    fake = FakePynvml(refused=("pci",))
    nvml.open_device(nvml.Selector(pci_bus_id="0000:19:00.0", uuid="5c8f", index=2), fake)
    assert fake.handles == ["uuid 5c8f"]
    fake = FakePynvml(refused=("pci", "uuid"))
    nvml.open_device(nvml.Selector(pci_bus_id="0000:19:00.0", uuid="5c8f", index=2), fake)
    assert fake.handles == ["index 2"]
    assert nvml.Selector.from_environment({"CUDA_VISIBLE_DEVICES": "3,1"}) == nvml.Selector(index=3)
    assert nvml.Selector.from_environment({}).index == 0
    assert nvml.Selector.from_environment({"CUDA_VISIBLE_DEVICES": "GPU-ab"}).uuid == "GPU-ab"


def test_nvml_that_cannot_start_says_why_in_one_line():
    with pytest.raises(nvml.NvmlUnavailable, match="NVML could not start: Driver Not Loaded"):
        nvml.open_device(nvml.Selector(), FakePynvml(init_error="Driver Not Loaded"))


def test_without_the_package_the_reason_names_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    with pytest.raises(nvml.NvmlUnavailable, match=r"pip install 'tlxdb\[gpu\]'"):
        nvml.open_device(nvml.Selector())


def test_the_host_environment_comes_from_sysfs_and_is_null_where_it_says_nothing(tmp_path):
    pci = tmp_path / "bus" / "pci" / "devices" / "0000:19:00.0"
    pci.mkdir(parents=True)
    (pci / "numa_node").write_text("1\n")
    for cpu, governor in ((0, "performance"), (1, "performance"), (2, "powersave")):
        folder = tmp_path / "devices" / "system" / "cpu" / f"cpu{cpu}" / "cpufreq"
        folder.mkdir(parents=True)
        (folder / "scaling_governor").write_text(governor + "\n")
    env = nvml.host_environment("00000000:19:00.0", tmp_path, {0, 1})
    assert env == {"gpu_numa_node": 1, "cpu_affinity": [0, 1], "cpu_governor": "performance"}
    assert nvml.host_environment("00000000:19:00.0", tmp_path, {0, 2})["cpu_governor"] == (
        "performance,powersave"
    )
    (pci / "numa_node").write_text("-1\n")  # a single-node machine: no NUMA node
    assert nvml.host_environment("00000000:19:00.0", tmp_path, {7}) == {
        "gpu_numa_node": None,
        "cpu_affinity": [7],
        "cpu_governor": None,
    }


def test_a_trace_recorded_from_a_device_replays_as_it_was_read():
    source = nvml.RecordedNvml(TRACE)  # a device that reads TRACE's first call, reading by reading
    recorded = nvml.record_trace(source, [("first", 0.0), ("second", 0.0)], period_s=0.0)
    assert recorded["labels"] == ["first", "second"]
    assert recorded["calls"][0][0]["processes"] == [["self", 1 << 30]]  # its own pid, as "self"
    replay = nvml.RecordedNvml(json.loads(json.dumps(recorded)))
    replay.start_call()
    r = replay.reading()
    assert (r.sm_clock_mhz, r.power_mw, r.processes) == (1980, 412000, ((os.getpid(), 1 << 30),))
    replay.start_call()
    assert replay.reading().sm_clock_mhz == 1965
    assert replay.environment() == TRACE["device"]


def _environment(*args: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "profilers.nvml", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    return json.loads(out.stdout)


def test_the_environment_is_one_json_line_from_a_trace_and_says_why_nvml_is_unavailable():
    recorded = _environment("--trace", str(NVML_TRACE))
    assert recorded["source"] == "recorded" and recorded["unavailable"] is None
    assert recorded["driver_version"] == trace()["device"]["driver_version"]
    here = _environment()  # this machine has no NVIDIA driver (or no pynvml)
    assert here["source"] is None and here["driver_version"] is None
    assert here["unavailable"].startswith(("NVML could not start", "the nvidia-ml-py package"))
    assert here["cpu_affinity"] == sorted(os.sched_getaffinity(0))


def test_the_runs_own_processes_are_no_neighbours_and_a_stranger_is():
    """A process of the run's own family (here a real child of this test process, standing for
    the ncu child tlxdb prestarts for the next candidate: it holds a CUDA context while this
    candidate is timed) is not a neighbour; a process outside it is (the H200 run of
    benchmarks/results/h200_bundle_new_2026-12-04 marked 48 of 48 calls for its own ncu child)."""
    sibling = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    stranger = 1  # init: the one ancestor never in the family
    try:
        reading = {"sm_clock_mhz": 1980, "processes": [[sibling.pid, 1 << 30], [stranger, 1 << 30]]}
        sampler = nvml.DeviceSampler(
            nvml.RecordedNvml({"calls": [[reading]]}), family_root=os.getpid()
        )
        with sampler.sampling() as call:
            pass
    finally:
        sibling.kill()
        sibling.wait()
    assert [n["pid"] for n in call["neighbours"]] == [stranger]


def test_the_script_that_started_the_run_and_waits_for_it_is_of_its_family():
    """A benchmark script (or a notebook) that holds a CUDA context while its tlxdb run runs is
    no neighbour: on the H200 one marked every call of the run it started and failed all its
    candidates unmeasured. Here this test process stands for the script and its child for the
    tlxdb run."""
    run = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        family = nvml.process_family(run.pid)
    finally:
        run.kill()
        run.wait()
    assert {run.pid, os.getpid(), os.getppid()} <= family and 1 not in family


def test_a_neighbour_that_stays_costs_one_family_scan_not_one_per_call(monkeypatch):
    """/proc is read when a pid is new, not again on every call it is seen in."""
    scans = []
    monkeypatch.setattr(nvml, "process_family", lambda root: scans.append(root) or {root})
    reading = {"sm_clock_mhz": 1980, "processes": [[nvml.SELF, 1 << 30], [4242, 1 << 30]]}
    sampler = nvml.DeviceSampler(nvml.RecordedNvml({"calls": [[reading]] * 3}), family_root=7)
    for _ in range(3):
        with sampler.sampling() as call:
            pass
        assert [n["pid"] for n in call["neighbours"]] == [4242]
    assert scans == [7]
