"""The trust-boundary sources tlxdb makes itself, and the device/--arch checks (fast, no child).
The full validation with real harnesses is exercised in tests/cli/test_optimize_cmds.py."""

import ast
import platform

import pytest
from support.bundles import KERNEL

from optimizer.bundle import validation
from tlxstore.events import DeviceInfo


def test_the_wrong_answer_mutant_perturbs_every_stored_value():
    mutant = validation.wrong_answer_mutant(KERNEL.read_text())
    assert mutant is not None and mutant.kernels == {"add_kernel"}
    stores = [
        n
        for n in ast.walk(ast.parse(mutant.source))
        if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "store"
    ]
    assert [ast.unparse(s.args[1]) for s in stores] == ["x + y + 1.0"]
    compile(mutant.source, "mutant.py", "exec")  # it still builds


def test_a_keyword_value_and_a_descriptor_store_are_perturbed_too():
    src = "def k(p, d, v):\n    tl.store(p, value=v, mask=None)\n    d.store([0, 0], v * 2)\n"
    mutant = validation.wrong_answer_mutant(src)
    assert (
        "tl.store(p, value=v + 1.0, mask=None)" in mutant.source
        and "d.store([0, 0], v * 2 + 1.0)" in mutant.source
    )


def test_a_kernel_whose_helper_stores_runs_a_perturbed_store():
    src = (
        "def write(p, v):\n    tl.store(p, v)\n"
        "def kernel(p, v):\n    write(p, v)\n"
        "def outer(p, v):\n    kernel(p, v)\n"
        "def unrelated(p):\n    return tl.load(p)\n"
    )
    assert validation.wrong_answer_mutant(src).kernels == {"write", "kernel", "outer"}


def test_a_kernel_without_stores_has_no_mutant():
    assert validation.wrong_answer_mutant("def f(x):\n    return x\n") is None


def test_the_unbuildable_source_does_not_compile():
    with pytest.raises(SyntaxError):
        compile(validation.unbuildable_source(KERNEL.read_text()), "k.py", "exec")


def test_a_cpu_target_with_the_interpreter_is_the_cpu_interpreter_device():
    d = validation.detect_device("cpu", {"TRITON_INTERPRET": "1"}, "python", {})
    assert (d.kind, d.backend, d.architecture) == ("cpu-interpreter", "cpu", platform.machine())
    assert validation.detect_device("cpu", {}, "python", {}).kind == "cpu"


def test_arch_matches_in_any_spelling_and_a_mismatch_is_named():
    h200 = DeviceInfo(kind="NVIDIA H200", backend="cuda", architecture="sm_90")
    for spelling in ("sm_90", "SM90", "90", "H100", "h100", "sm90", "hopper", "Hopper", "H200"):
        validation.check_arch(spelling, h200)
        validation.check_arch(None, h200, target_architecture=spelling)
    with pytest.raises(
        validation.ArchMismatchError,
        match=r"^--arch sm_100 expects sm_10x, but the device \(NVIDIA H200\) is sm_90$",
    ):
        validation.check_arch("sm_100", h200)


def test_blackwell_and_amd_aliases_match_their_devices_and_a_mismatch_is_one_line():
    b200 = DeviceInfo(kind="NVIDIA B200", backend="cuda", architecture="sm_100")
    for spelling in ("blackwell", "B200", "gb200", "sm_100", "sm100"):
        validation.check_arch(None, b200, target_architecture=spelling)
    mi300 = DeviceInfo(kind="AMD Instinct MI300X", backend="hip", architecture="gfx942:sramecc+")
    for spelling in ("gfx942", "MI300X", "mi300", "cdna3"):
        validation.check_arch(None, mi300, target_architecture=spelling)
    with pytest.raises(
        validation.ArchMismatchError,
        match=r"^target.json architecture H100 expects sm_9x \(Hopper: H100, H200, GH200\), but the "
        r"device \(NVIDIA B200\) is sm_100; `tlxdb bundle new` writes a bundle for this device$",
    ):
        validation.check_arch(None, b200, target_architecture="H100")
    with pytest.raises(validation.ArchMismatchError, match="expects gfx950, but the device"):
        validation.check_arch(None, mi300, target_architecture="mi355")
    validation.check_arch(None, b200, target_architecture="some-lab-name")  # not checkable
