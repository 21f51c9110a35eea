"""The trust-boundary sources tlxdb makes itself (fast, no child). The full validation with real harnesses is exercised in tests/cli/test_optimize_cmds.py."""

import ast

import pytest
from support.bundles import KERNEL

from optimizer.run import validation


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
