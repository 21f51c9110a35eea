"""Which devices `--devices` names, and how a harness child is pinned to one."""

from __future__ import annotations

import sys

import pytest

from optimizer.run.devices import assign, pin
from tlxstore.errors import ConfigError
from tlxstore.events import DevicesAssigned


def test_simulated_devices_are_recorded_as_simulated_and_named_to_the_child(monkeypatch):
    monkeypatch.setenv("TLXDB_SIMULATED_DEVICES", "4")
    assigned = assign("all", "cpu", "python3", {}, {})
    assert assigned == DevicesAssigned(
        devices=["0", "1", "2", "3"], pin_variable=None, simulated=True
    )
    assert assign(" 3, 1 ", "cpu", "python3", {}, {}).devices == ["3", "1"]
    assert pin(assigned, "2", {}) == {"TLXDB_SIMULATED_DEVICE": "2"}


def test_a_cpu_target_has_one_device_and_nothing_to_pin():
    assigned = assign("all", "cpu", "python3", {}, {})
    assert (assigned.devices, assigned.simulated) == (["0"], False)
    assert pin(assigned, "0", {}) == {}


def test_a_gpu_is_pinned_by_its_index_or_by_the_entry_the_environment_already_narrows_to():
    cuda = DevicesAssigned(devices=["0", "1"], pin_variable="CUDA_VISIBLE_DEVICES")
    assert pin(cuda, "1", {}) == {"CUDA_VISIBLE_DEVICES": "1"}
    assert pin(cuda, "1", {"CUDA_VISIBLE_DEVICES": "4,6"}) == {"CUDA_VISIBLE_DEVICES": "6"}
    hip = DevicesAssigned(devices=["0"], pin_variable="HIP_VISIBLE_DEVICES")
    assert pin(hip, "0", {}) == {"HIP_VISIBLE_DEVICES": "0"}


def _gpus(tmp_path, names: list[str]) -> dict[str, str]:
    """A child environment whose `torch` reports the GPUs `names` (no GPU can be had here: the
    stand-in is a real module the device probe's child imports instead of torch)."""
    fake = tmp_path / "fake_torch" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(
        "class cuda:\n"
        f"    _names = {names!r}\n"
        "    device_count = staticmethod(lambda: len(cuda._names))\n"
        "    get_device_name = staticmethod(lambda i: cuda._names[i])\n"
    )
    return {"PYTHONPATH": str(fake.parent)}


def test_devices_of_different_kinds_are_refused_and_devices_of_one_kind_are_pinned(tmp_path):
    env = _gpus(tmp_path, ["NVIDIA H200", "NVIDIA H100 80GB HBM3", "NVIDIA H200"])
    with pytest.raises(ConfigError) as e:
        assign("all", "cuda", sys.executable, env, {})
    assert e.value.message == (
        "--devices all: the devices are of different kinds (NVIDIA H100 80GB HBM3, NVIDIA H200); "
        "a run compares measurements of one kind, name devices of one kind"
    )
    same = assign("0,2", "cuda", sys.executable, env, {})
    assert same == DevicesAssigned(devices=["0", "2"], pin_variable="CUDA_VISIBLE_DEVICES")
