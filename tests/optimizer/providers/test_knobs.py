"""optimizer.providers.knobs: reading a kernel's launch/compile knobs from its AST, and rewriting them."""

from __future__ import annotations

import difflib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from optimizer.providers.knobs import (
    KnobError,
    KnobOrigin,
    KnobRole,
    apply_knobs,
    config_signature,
    find_knobs,
    knob_values,
    parse_signature,
    pin_autotune,
)

REPO = Path(__file__).resolve().parents[3]
SOFTMAX = (REPO / "examples" / "softmax" / "kernel.py").read_text()
RMSNORM = (REPO / "examples" / "rmsnorm" / "kernel.py").read_text()
MATMUL = (REPO / "examples" / "matmul" / "kernel.py").read_text()

HEADER = "import triton\nimport triton.language as tl\n"

VECADD = HEADER + textwrap.dedent(
    """
    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


    def add(x, y, out):
        n = x.numel()
        block = 128
        add_kernel[(triton.cdiv(n, block),)](x, y, out, n, block,)
        return out
    """
)


def _changed_lines(a: str, b: str) -> list[str]:
    return [
        line
        for line in difflib.unified_diff(a.splitlines(), b.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


def test_launch_constexpr_and_compile_knobs_are_found():
    space = find_knobs(SOFTMAX)
    knobs = space.by_name()
    assert knob_values(SOFTMAX) == {"BLOCK": 128, "num_warps": 4, "num_stages": 3}
    assert knobs["BLOCK"].role == KnobRole.BLOCK and knobs["BLOCK"].loop_step
    assert knobs["BLOCK"].origin == KnobOrigin.LAUNCH
    assert knobs["num_warps"].explicit and not knobs["num_stages"].explicit  # Triton's default
    assert space.kernels["softmax_kernel"].arange_params == ["BLOCK"]


def test_module_constants_feeding_a_launch_are_knobs_named_after_the_constant():
    knobs = find_knobs(RMSNORM).by_name()
    assert knobs["BLOCK"].origin == KnobOrigin.CONSTANT and knobs["BLOCK"].value == 256
    assert knobs["NUM_WARPS"].role == KnobRole.WARPS and knobs["NUM_WARPS"].value == 1
    out = apply_knobs(RMSNORM, {"BLOCK": 4096, "NUM_WARPS": 16})
    assert _changed_lines(RMSNORM, out) == [
        "-BLOCK = 256",
        "-NUM_WARPS = 1",
        "+BLOCK = 4096",
        "+NUM_WARPS = 16",
    ]


def test_local_constants_and_positional_constexpr_arguments_are_knobs():
    knobs = find_knobs(VECADD).by_name()
    assert knobs["block"].value == 128 and knobs["block"].role == KnobRole.BLOCK
    assert knobs["block"].origin == KnobOrigin.CONSTANT
    out = apply_knobs(VECADD, {"block": 1024, "num_warps": 8})
    assert "block = 1024" in out and "n, block, num_warps=8,)" in out
    assert knob_values(out) == {"block": 1024, "num_warps": 8, "num_stages": 3}


def test_a_computed_block_size_is_not_a_knob():
    source = VECADD.replace("block = 128", "block = triton.next_power_of_2(n)")
    assert "block" not in knob_values(source)
    assert set(knob_values(source)) == {"num_warps", "num_stages"}


def test_rewriting_changes_only_the_literals_of_changed_knobs():
    out = apply_knobs(MATMUL, {"BLOCK_M": 128, "BLOCK_N": 256, "num_stages": 2})
    changed = _changed_lines(MATMUL, out)
    assert len(changed) == 2  # one launch line, before and after
    assert (
        "BLOCK_M=128, BLOCK_N=256, BLOCK_K=32, GROUP_M=8, num_warps=4, num_stages=2" in changed[1]
    )


def test_rewriting_does_not_depend_on_the_path():
    direct = apply_knobs(SOFTMAX, {"BLOCK": 1024, "num_warps": 8, "num_stages": 4})
    stepped = apply_knobs(apply_knobs(SOFTMAX, {"BLOCK": 256}), {"BLOCK": 1024, "num_warps": 8})
    stepped = apply_knobs(stepped, {"num_stages": 4})
    assert direct == stepped


def test_an_inserted_keyword_follows_a_trailing_comma_and_reads_back():
    out = apply_knobs(VECADD, {"num_stages": 2, "num_warps": 2})
    compile(out, "vecadd.py", "exec")
    assert "n, block, num_warps=2, num_stages=2,)" in out
    assert knob_values(out)["num_stages"] == 2


def test_keywords_inserted_where_nothing_is_written_yet_stay_valid_python():
    source = HEADER + textwrap.dedent(
        """
        @triton.jit
        def k():
            pass

        def run():
            k[(1,)]()
            config = {}
            k[(2,)](**config)
        """
    )
    out = apply_knobs(source, {"num_warps": 8, "num_stages": 2})
    compile(out, "k.py", "exec")
    assert "k[(1,)](num_warps=8, num_stages=2, )" in out
    assert 'config = {"num_warps": 8, "num_stages": 2, }' in out
    assert knob_values(out) == {"num_warps": 8, "num_stages": 2}


def test_autotune_with_one_config_exposes_its_values():
    source = HEADER + textwrap.dedent(
        """
        @triton.autotune(configs=[triton.Config({"BLOCK": 64}, num_warps=2)], key=["n"])
        @triton.jit
        def k(x_ptr, n, BLOCK: tl.constexpr):
            tl.store(x_ptr + tl.arange(0, BLOCK), 1.0)

        def run(x):
            k[(1,)](x, x.numel())
        """
    )
    knobs = find_knobs(source).by_name()
    assert {n: k.origin for n, k in knobs.items()} == {
        "BLOCK": KnobOrigin.AUTOTUNE,
        "num_warps": KnobOrigin.AUTOTUNE,
        "num_stages": KnobOrigin.AUTOTUNE,
    }
    out = apply_knobs(source, {"BLOCK": 256, "num_stages": 4})
    assert 'triton.Config({"BLOCK": 256}, num_warps=2, num_stages=4)' in out


def test_an_autotune_list_is_a_choice_and_pinning_keeps_one_config():
    source = HEADER + textwrap.dedent(
        """
        CONFIGS = [
            triton.Config({"BLOCK": 64}, num_warps=2),
            triton.Config({"BLOCK": 256}, num_warps=8, num_stages=4),
        ]

        @triton.autotune(configs=CONFIGS, key=["n"])
        @triton.jit
        def k(x_ptr, n, BLOCK: tl.constexpr):
            tl.store(x_ptr + tl.arange(0, BLOCK), 1.0)

        def run(x):
            k[(1,)](x, x.numel())
        """
    )
    space = find_knobs(source)
    assert space.knobs == []  # the autotuner decides: nothing is pinned yet
    (choice,) = space.autotune_choices
    assert choice.configs[1] == {"BLOCK": 256, "num_warps": 8, "num_stages": 4}
    pinned = pin_autotune(source, "k", 1)
    assert knob_values(pinned) == {"BLOCK": 256, "num_warps": 8, "num_stages": 4}
    with pytest.raises(KnobError):
        pin_autotune(source, "k", 2)


def test_the_rewritten_kernel_runs_on_the_interpreter(tmp_path: Path):
    out = apply_knobs(SOFTMAX, {"BLOCK": 256, "num_warps": 2, "num_stages": 1})
    (tmp_path / "k.py").write_text(out)
    script = (
        "import sys, torch; sys.path.insert(0, sys.argv[1]); import k;"
        "x = torch.randn(3, 1000); print(float((k.softmax(x) - torch.softmax(x, -1)).abs().max()))"
    )
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert float(done.stdout.strip()) < 1e-5


def test_an_unparsable_source_or_an_unknown_knob_is_refused():
    with pytest.raises(KnobError, match="does not parse"):
        find_knobs("def broken(:\n")
    assert knob_values("def broken(:\n") == {}
    with pytest.raises(KnobError, match="no knob BLOCK_Q"):
        apply_knobs(SOFTMAX, {"BLOCK_Q": 4})
    with pytest.raises(KnobError, match="not an integer"):
        apply_knobs(SOFTMAX, {"BLOCK": 6.5})  # type: ignore[dict-item]


def test_a_signature_names_a_configuration_and_reads_back():
    sig = config_signature({"num_warps": 8, "BLOCK": 64})
    assert sig == "BLOCK=64,num_warps=8"
    assert parse_signature(sig) == {"BLOCK": 64, "num_warps": 8}
    assert parse_signature("rewrote the inner loop") is None
