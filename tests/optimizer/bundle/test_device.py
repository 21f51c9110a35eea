"""The device a target names and the --arch checks (fast, no child)."""

import platform

import pytest

from optimizer.bundle import device
from tlxstore.events import DeviceInfo


def test_a_cpu_target_with_the_interpreter_is_the_cpu_interpreter_device():
    d = device.detect_device("cpu", {"TRITON_INTERPRET": "1"}, "python", {})
    assert (d.kind, d.backend, d.architecture) == ("cpu-interpreter", "cpu", platform.machine())
    assert device.detect_device("cpu", {}, "python", {}).kind == "cpu"


def test_arch_matches_in_any_spelling_and_a_mismatch_is_named():
    h200 = DeviceInfo(kind="NVIDIA H200", backend="cuda", architecture="sm_90")
    for spelling in ("sm_90", "SM90", "90", "H100", "h100", "sm90", "hopper", "Hopper", "H200"):
        device.check_arch(spelling, h200)
        device.check_arch(None, h200, target_architecture=spelling)
    with pytest.raises(
        device.ArchMismatchError,
        match=r"^--arch sm_100 expects sm_10x, but the device \(NVIDIA H200\) is sm_90$",
    ):
        device.check_arch("sm_100", h200)


def test_blackwell_and_amd_aliases_match_their_devices_and_a_mismatch_is_one_line():
    b200 = DeviceInfo(kind="NVIDIA B200", backend="cuda", architecture="sm_100")
    for spelling in ("blackwell", "B200", "gb200", "sm_100", "sm100"):
        device.check_arch(None, b200, target_architecture=spelling)
    mi300 = DeviceInfo(kind="AMD Instinct MI300X", backend="hip", architecture="gfx942:sramecc+")
    for spelling in ("gfx942", "MI300X", "mi300", "cdna3"):
        device.check_arch(None, mi300, target_architecture=spelling)
    with pytest.raises(
        device.ArchMismatchError,
        match=r"^target.json architecture H100 expects sm_9x \(Hopper: H100, H200, GH200\), but the "
        r"device \(NVIDIA B200\) is sm_100; `tlxdb bundle new` writes a bundle for this device$",
    ):
        device.check_arch(None, b200, target_architecture="H100")
    with pytest.raises(device.ArchMismatchError, match="expects gfx950, but the device"):
        device.check_arch(None, mi300, target_architecture="mi355")
    device.check_arch(None, b200, target_architecture="some-lab-name")  # not checkable
