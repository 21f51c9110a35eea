"""`tlxdb bundle new` for a kernel whose entry point is a torch.autograd.Function's apply (the
Triton tutorials' style: `layer_norm = LayerNorm.apply`), through the real CLI on the Triton
interpreter: both spellings of the entry validate, the harness calling apply by position in
forward's order; a name bound to anything else is refused in one line with nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cli.main import main

# forward takes normalized_shape as the tutorial's LayerNorm does, and ignores it as it does
ROW_NORM = """
import functools

import torch
import triton
import triton.language as tl


@triton.jit
def row_norm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(x_ptr + row * n + cols, mask=mask, other=0.0)
    centered = tl.where(mask, x - tl.sum(x, axis=0) / n, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(centered * centered, axis=0) / n + eps)
    w = tl.load(w_ptr + cols, mask=mask)
    b = tl.load(b_ptr + cols, mask=mask)
    tl.store(y_ptr + row * n + cols, centered * rstd * w + b, mask=mask)


class RowNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, normalized_shape, weight, bias, eps):
        y = torch.empty_like(x)
        rows = x.reshape(-1, x.shape[-1])
        n = rows.shape[1]
        row_norm_kernel[(rows.shape[0],)](
            rows, weight, bias, y, n, eps, BLOCK=triton.next_power_of_2(n)
        )
        return y


row_norm = RowNorm.apply
"""
ACCEPTED = (
    "give --entry the Python function that launches the kernel and returns its result (a "
    "top-level def), or the apply of a torch.autograd.Function subclass defined in the file "
    "(Fn.apply, or a name bound to it)"
)
REFERENCE = "F.layer_norm(x, (x.shape[-1],), weight, bias, eps)"
# the tensors in another order than forward's, so that a call in the given order would fail
ARGUMENTS = [
    "--shape", "weight=48", "--shape", "bias=48", "--shape", "x=3,48",
    "--scalar", "eps=1e-5", "--scalar", "normalized_shape=48",
]  # fmt: skip


def bundle_new(tmp: Path, entry: str, kernel: str = ROW_NORM, arguments=ARGUMENTS) -> Result:
    (tmp / "src").mkdir(exist_ok=True)
    (tmp / "src" / "row_norm.py").write_text(kernel)
    return CliRunner().invoke(
        main,
        [
            "bundle", "new", "--kernel", str(tmp / "src" / "row_norm.py"), "--entry", entry,
            "--reference", REFERENCE, *arguments, "--backend", "cpu", "--out", str(tmp / "b"),
        ],
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("entry", ["row_norm", "RowNorm.apply"])
def test_an_autograd_functions_apply_becomes_a_validated_bundle(tmp_path, entry):
    made = bundle_new(tmp_path, entry)
    assert made.exit_code == 0, made.output
    for check in ("baseline:verify", "negative:wrong_output", "negative:wrong_answer"):
        assert f"PASS  {check}" in made.stdout
    harness = (tmp_path / "b" / "harness.py").read_text()
    assert f"ENTRY = {entry!r}" in harness
    assert "POSITIONAL = ('x', 'normalized_shape', 'weight', 'bias', 'eps')" in harness


def line_of(text: str, kernel: str) -> int:
    return kernel.splitlines().index(text) + 1


@pytest.mark.parametrize(
    ("entry", "binding", "found"),
    [
        (
            "row_norm",
            "row_norm = lambda x, weight, bias, eps: RowNorm.apply(x, None, weight, bias, eps)",
            "binds row_norm to a lambda",
        ),
        (
            "row_norm",
            "row_norm = functools.partial(RowNorm.apply, normalized_shape=None)",
            "binds row_norm to a call of functools.partial",
        ),
        (
            "row_norm",
            "from torch.nn.functional import layer_norm as row_norm",
            "imports row_norm",
        ),
        ("RowNorm", "class RowNorm(torch.autograd.Function):", "defines RowNorm as a "),
        ("RowNorm.forward", "class RowNorm(torch.autograd.Function):", "defines RowNorm as a "),
    ],
    ids=["lambda", "partial", "imported", "class", "forward"],
)
def test_an_entry_that_is_no_function_nor_apply_is_refused_in_one_line(
    tmp_path, entry, binding, found
):
    kernel = ROW_NORM if binding in ROW_NORM else f"{ROW_NORM}\n{binding}\n"
    made = bundle_new(tmp_path, entry, kernel)
    assert made.exit_code == 1
    [line] = made.stderr.strip().splitlines()
    where = f"(line {line_of(binding, kernel)})"
    prefix = f"--entry {entry}: " if "." in entry else ""
    if entry.startswith("RowNorm"):
        found += f"torch.autograd.Function subclass {where}"
    elif binding.startswith("from"):
        found += f" {where}: `{binding}`"
    else:
        found += f" {where}"
    assert line == f"Error: {prefix}row_norm.py {found}; {ACCEPTED}"
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize(
    ("kernel", "arguments", "message"),
    [
        (  # as a def with such a parameter: refused, not passed as None
            ROW_NORM,
            ARGUMENTS[:-2],
            "row_norm's parameter normalized_shape is given no --shape or --scalar (every "
            "parameter without a default needs one)",
        ),
        (  # its default cannot be passed in its place by position
            ROW_NORM.replace(
                "normalized_shape, weight, bias, eps)",
                "normalized_shape=None, weight=None, bias=None, eps=1e-5)",
            ),
            ARGUMENTS[:-2],
            "row_norm takes its arguments by position (a torch.autograd.Function's apply), so "
            "normalized_shape, before eps, needs a --shape or --scalar too",
        ),
    ],
    ids=["not-given", "skipped"],
)
def test_an_apply_parameter_not_given_is_refused_in_one_line(tmp_path, kernel, arguments, message):
    made = bundle_new(tmp_path, "row_norm", kernel, arguments)
    assert made.exit_code == 1
    assert made.stderr.strip() == f"Error: {message}"
    assert not (tmp_path / "b").exists()


def test_a_forward_without_ctx_has_all_its_parameters(tmp_path):
    # the newer style: ctx goes to setup_context, so forward's first parameter is an argument
    kernel = ROW_NORM.replace("forward(ctx, x,", "forward(x,").replace(
        "        return y\n",
        "        return y\n\n    @staticmethod\n    def setup_context(ctx, inputs, output):\n"
        "        pass\n",
    )
    made = bundle_new(tmp_path, "row_norm", kernel, [*ARGUMENTS, "--no-validate"])
    assert made.exit_code == 0, made.output
    harness = (tmp_path / "b" / "harness.py").read_text()
    assert "POSITIONAL = ('x', 'normalized_shape', 'weight', 'bias', 'eps')" in harness


THROUGH_A_BASE = ROW_NORM.replace(
    "class RowNorm(torch.autograd.Function):",
    "class _Common(torch.autograd.Function):\n    @staticmethod\n    def backward(ctx, dy):\n"
    "        raise NotImplementedError\n\n\nclass RowNorm(_Common):",
)


@pytest.mark.slow
def test_an_apply_of_a_function_derived_through_a_base_of_the_file_is_found(tmp_path):
    """`class RowNorm(_Common)`, `_Common` the file's own torch.autograd.Function subclass, was
    refused ("defines no torch.autograd.Function subclass RowNorm"): only a base named Function
    counted. Its lineage in the file counts now, and forward may come from a base."""
    made = bundle_new(tmp_path, "row_norm", THROUGH_A_BASE)
    assert made.exit_code == 0, made.output
    assert "PASS  baseline:verify" in made.stdout
    inherited = THROUGH_A_BASE.replace(
        "row_norm = RowNorm.apply", "class Again(RowNorm):\n    pass\n\n\nrow_norm = Again.apply"
    )
    (tmp_path / "again").mkdir()
    again = bundle_new(tmp_path / "again", "Again.apply", inherited, [*ARGUMENTS, "--no-validate"])
    assert again.exit_code == 0, again.output
    harness = (tmp_path / "again" / "b" / "harness.py").read_text()
    assert "POSITIONAL = ('x', 'normalized_shape', 'weight', 'bias', 'eps')" in harness
