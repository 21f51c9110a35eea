"""`tlxdb bundle new` through the real CLI: from a Triton kernel written here and a PyTorch
reference to a validated bundle and a finished `tlxdb optimize`, with no hand-written harness, on
the Triton interpreter; the generated harness refusing a wrong kernel, an aliased output and a
kernel that writes its input; bad input refused in one line with nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cli.main import main

REPO = Path(__file__).resolve().parents[2]

ADD = """
import torch
import triton
import triton.language as tl

BLOCK = 128


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, {result}, mask=mask)


def add(x, y):
    out = {out}
    n = x.numel()
    add_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK)
    return {returned}
"""
GOOD = {"result": "x + y", "out": "torch.empty_like(x)", "returned": "out"}

SCALE = """
import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, out_ptr, s, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * s, mask=mask)


def scale(x, s):
    if s == 1.0:
        return x  # "nothing to do": the input itself, not a fresh tensor
    out = torch.empty_like(x)
    scale_kernel[(triton.cdiv(x.numel(), 256),)](x, out, s, x.numel(), BLOCK=256)
    return out
"""


def cli(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def write_add(folder: Path, **changes: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "add.py"
    path.write_text(ADD.format(**{**GOOD, **changes}))
    return path


def new_add_bundle(tmp: Path, kernel: Path, *extra: str) -> Result:
    return cli(
        "bundle", "new", "--kernel", str(kernel), "--entry", "add",
        "--reference", "torch.add(x, y)", "--shape", "x=300", "--shape", "y=300",
        "--out", str(tmp / "bundle"), *extra,
    )  # fmt: skip


@pytest.mark.slow
def test_a_kernel_and_torch_add_become_a_validated_bundle_and_a_finished_run(tmp_path):
    kernel = write_add(tmp_path / "src")
    made = cli(
        "bundle", "new", "--kernel", str(kernel), "--entry", "add",
        "--reference", "torch.add(x, y)",
        "--shape", "x=64", "--shape", "y=64", "--shape", "x=200", "--shape", "y=200",
        "--out", str(tmp_path / "bundle"),
    )  # fmt: skip
    assert made.exit_code == 0, made.output
    table = [line.split()[:2] for line in made.stdout.splitlines() if line[:4] in {"PASS", "WARN"}]
    assert ["PASS", "baseline:verify"] in table
    assert ["PASS", "negative:wrong_output"] in table and ["PASS", "negative:wrong_answer"] in table
    bundle = tmp_path / "bundle"
    assert sorted(p.name for p in bundle.iterdir()) == [
        "budget.json", "cases.json", "harness.py", "target.json",
    ]  # fmt: skip
    cases = json.loads((bundle / "cases.json").read_text())
    assert [c["case_id"] for c in cases] == ["64", "200"]
    assert cases[1]["parameters"]["shapes"] == {"x": [200], "y": [200]}
    target = json.loads((bundle / "target.json").read_text())
    assert target["backend"] == "cpu"  # this machine: no GPU
    assert target["environment"] == {"TRITON_INTERPRET": "1"}

    store = tmp_path / "store.duckdb"
    run = cli(
        "optimize", "--kernel", str(kernel), "--bundle", str(bundle), "--store", str(store),
        "--no-commit-winner", "--max-rounds", "1", "--candidates-per-round", "1",
        "--result-format", "summary",
    )  # fmt: skip
    assert run.exit_code in (0, 2), run.output
    result = json.loads(run.stdout)
    assert result["experiments"] == 1  # one candidate besides the baseline, measured
    # what cannot exist on the CPU is said once for the run, not once per candidate
    assert run.stderr.count("Proton is unavailable on this target") == 1
    assert run.stderr.count("no bandwidth or compute ceiling is known") == 1


@pytest.mark.slow
@pytest.mark.parametrize(
    ("changes", "diagnostics"),
    [
        (  # off by one everywhere: `x - y` was, except where a fresh seed drew some y near 0
            {"result": "x + y + 1.0"},
            "output 0: 300 of 300 values off (atol 1e-05, rtol 0.0001;",
        ),
        (  # the sum is written into x, and a copy of it returned: right values, a spoiled input
            {"result": "x + y", "out": "x", "returned": "out.clone()"},
            "the kernel wrote into its input x",
        ),
    ],
    ids=["wrong-result", "writes-its-input"],
)
def test_the_generated_harness_refuses_a_wrong_kernel_and_nothing_is_written(
    tmp_path, changes, diagnostics
):
    made = new_add_bundle(tmp_path, write_add(tmp_path / "src", **changes), "--backend", "cpu")
    assert made.exit_code == 1, made.output
    assert "FAIL  baseline:verify" in made.stdout
    assert (
        f"Error: validation failed (baseline:verify): protected case 300 failed verification: {diagnostics}"
        in made.stderr
    )
    assert "nothing was written" in made.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]  # no bundle, no staging folder


@pytest.mark.slow
def test_the_generated_harness_refuses_an_output_that_is_an_input(tmp_path):
    (tmp_path / "scale.py").write_text(SCALE)
    made = cli(
        "bundle", "new", "--kernel", str(tmp_path / "scale.py"), "--entry", "scale",
        "--reference", "x * s", "--shape", "x=500", "--scalar", "s=1.0", "--backend", "cpu",
        "--out", str(tmp_path / "bundle"),
    )  # fmt: skip
    assert made.exit_code == 1, made.output
    assert "output 0 shares memory with input x (outputs must be fresh tensors)" in made.stderr
    assert not (tmp_path / "bundle").exists()


@pytest.mark.slow
def test_the_device_scripts_fused_kernel_validates_against_its_reference_file(tmp_path):
    # benchmarks/device/h200_bundle_new.sh's kernel on the interpreter: a file reference, bf16,
    # two outputs (y, h) and a scalar
    here = REPO / "benchmarks" / "device" / "add_rmsnorm"
    made = cli(
        "bundle", "new", "--kernel", str(here / "kernel.py"), "--entry", "add_rmsnorm",
        "--reference", f"{here / 'ref.py'}:add_rmsnorm", "--shape", "x=4,300",
        "--shape", "residual=4,300", "--shape", "weight=300", "--scalar", "eps=1e-6",
        "--dtype", "bfloat16", "--backend", "cpu", "--out", str(tmp_path / "bundle"),
    )  # fmt: skip
    assert made.exit_code == 0, made.output
    assert "PASS  negative:wrong_answer" in made.stdout
    bundle = tmp_path / "bundle"
    assert (bundle / "reference_kernel.py").read_text() == (here / "ref.py").read_text()
    assert "_reference_module().add_rmsnorm(**arguments)" in (bundle / "harness.py").read_text()
    [case] = json.loads((bundle / "cases.json").read_text())
    assert case["case_id"] == "4x300_300"
    assert case["parameters"] == {
        "dtype": "bfloat16",
        "shapes": {"x": [4, 300], "residual": [4, 300], "weight": [300]},
        "scalars": {"eps": 1e-6},
    }
    assert f"next: tlxdb optimize --kernel {here / 'kernel.py'} --bundle {bundle}" in made.stdout


def test_no_validate_writes_the_bundle_unchecked(tmp_path):
    kernel = write_add(tmp_path / "src", result="x - y")  # wrong, and not checked
    made = new_add_bundle(tmp_path, kernel, "--backend", "cpu", "--no-validate")
    assert made.exit_code == 0, made.output
    assert "PASS" not in made.stdout and "not validated" in made.stdout
    assert (tmp_path / "bundle" / "harness.py").is_file()


@pytest.mark.parametrize(
    ("options", "shapes", "message"),
    [
        ({"--entry": "nope"}, None, "add.py defines no function nope; give --entry the Python"),
        ({"--entry": "add_kernel"}, None, "add_kernel is a Triton kernel (@triton.jit)"),
        ({}, ["z=4"], "add has no parameter z (its parameters: x, y)"),
        ({}, ["x=4"], "add's parameter y is given no --shape or --scalar"),
        ({}, ["x=4,-1", "y=4"], "--shape 'x=4,-1': write NAME=D0,D1,... with positive sizes"),
        ({}, ["x=4", "y=4", "x=8"], "case 2 gives shapes for x, case 1 for x, y"),
        ({"--reference": "torch.add(x, w)"}, None, "--reference names w, which is no argument"),
        ({"--reference": "x +"}, None, "--reference 'x +' is not a Python expression"),
        ({"--dtype": "float128"}, None, "--dtype: dtype 'float128' is not one of float64"),
        ({"--scalar": "alpha=1e-6x"}, None, "--scalar 'alpha=1e-6x': write NAME=VALUE"),
        ({"--scalar": "alpha=[1, 2]"}, None, "--scalar 'alpha=[1, 2]': write NAME=VALUE"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, options, shapes, message):
    kernel = write_add(tmp_path / "src")
    argv = ["bundle", "new", "--kernel", str(kernel), "--backend", "cpu"]
    for flag, value in {"--entry": "add", "--reference": "torch.add(x, y)", **options}.items():
        argv += [flag, value]
    for shape in shapes or ["x=4", "y=4"]:
        argv += ["--shape", shape]
    made = cli(*argv, "--out", str(tmp_path / "bundle"))
    assert made.exit_code == 1
    [line] = made.stderr.strip().splitlines()
    assert line.startswith(f"Error: {message}"), line
    assert not (tmp_path / "bundle").exists()


def test_an_existing_bundle_is_never_overwritten(tmp_path):
    kernel = write_add(tmp_path / "src")
    (tmp_path / "bundle").mkdir()
    (tmp_path / "bundle" / "harness.py").write_text("# mine\n")
    made = new_add_bundle(tmp_path, kernel, "--backend", "cpu")
    assert made.exit_code == 1
    assert "already exists; tlxdb bundle new never overwrites a bundle" in made.stderr
    assert [p.name for p in (tmp_path / "bundle").iterdir()] == ["harness.py"]
    assert (tmp_path / "bundle" / "harness.py").read_text() == "# mine\n"


HELPER = """
import torch
import triton
import triton.language as tl


@triton.jit
def twice(v):
    return v * 2


@triton.jit
def double_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, twice(tl.load(x_ptr + offs, mask=mask)), mask=mask)


def double(x):
    out = torch.empty_like(x)
    double_kernel[(triton.cdiv(x.numel(), 128),)](x, out, x.numel(), BLOCK=128)
    return out
"""


def new_double_bundle(tmp: Path, kernel_text: str) -> Result:
    """`bundle new` on the interpreter for `double` of `kernel_text`, written to tmp/double.py."""
    (tmp / "double.py").write_text(kernel_text)
    return cli(
        "bundle", "new", "--kernel", str(tmp / "double.py"), "--entry", "double",
        "--reference", "x * 2", "--shape", "x=300", "--out", str(tmp / "bundle"),
        "--backend", "cpu",
    )  # fmt: skip


@pytest.mark.slow
def test_a_kernel_that_calls_a_jit_helper_passes_the_nan_check(tmp_path):
    """The NaN mutant replaced every @triton.jit object of the module with a wrapper, the helper
    too, so the kernel calling it no longer compiled: `negative:wrong_output` was inconclusive
    (a WARN) and --strict-validation refused a correct bundle (a new user's scale kernel)."""
    made = new_double_bundle(tmp_path, HELPER)
    assert made.exit_code == 0, made.output
    assert "PASS  negative:wrong_output  verify() refused a kernel whose results are NaN" in (
        made.stdout
    )
    strict = cli(
        "validate", "--kernel", str(tmp_path / "double.py"), "--bundle", str(tmp_path / "bundle"),
        "--strict-validation",
    )  # fmt: skip
    assert strict.exit_code == 0, strict.output


# The tutorial's persistent softmax reads the GPU's properties when its file is imported.
GPU_AT_IMPORT = HELPER.replace(
    "import triton.language as tl\n",
    "import triton.language as tl\nfrom triton.runtime import driver\n\n"
    "PROPERTIES = driver.active.utils.get_device_properties(0)\n",
)


@pytest.mark.slow
def test_a_kernel_file_that_queries_the_gpu_at_import_is_refused_with_its_line(tmp_path):
    """On the interpreter Triton has no driver: the failure names the kernel file's line that
    asked for the GPU and what to do, not only do_bench and autotune (a new user's case)."""
    made = new_double_bundle(tmp_path, GPU_AT_IMPORT)
    assert made.exit_code == 1, made.output
    (line,) = [ln for ln in made.stdout.splitlines() if ln.startswith("FAIL")]
    assert line.split()[1] == "baseline:build" and "0 active drivers" in line, line
    assert "(kernel file line 7: PROPERTIES = driver.active.utils.get_device_properties(0))" in line
    assert "take device numbers (the SM count) from a constant" in line
    assert not (tmp_path / "bundle").exists()


ACTIVATION = """
import torch
import triton
import triton.language as tl


@triton.jit
def act_kernel(x_ptr, out_ptr, n, ACTIVATION: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    if ACTIVATION == "relu":
        x = tl.maximum(x, 0.0)
    tl.store(out_ptr + offs, x, mask=mask)


def act(x, activation="", scale: float = 1.0):
    out = torch.empty_like(x)
    act_kernel[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), ACTIVATION=activation, BLOCK=256)
    return out * scale
"""


def new_act_bundle(tmp: Path, out: str, reference: str, scalar: str) -> Result:
    (tmp / "act.py").write_text(ACTIVATION)
    return cli(
        "bundle", "new", "--kernel", str(tmp / "act.py"), "--entry", "act", "--reference",
        reference, "--shape", "x=500", "--scalar", scalar, "--backend", "cpu", "--out", str(tmp / out),
    )  # fmt: skip


def scalars(bundle: Path) -> dict:
    [case] = json.loads((bundle / "cases.json").read_text())
    return case["parameters"]["scalars"]


@pytest.mark.slow
def test_a_word_is_a_string_argument_as_the_tutorials_activation(tmp_path):
    # the Triton matmul tutorial's style: ACTIVATION, a string constexpr ("leaky_relu" or ""),
    # passed through the launching function; `--scalar activation=relu` was refused ("write
    # NAME=VALUE with a number or True/False")
    relu = "torch.relu(x) if activation == 'relu' else x"
    made = new_act_bundle(tmp_path, "bundle", relu, "activation=relu")
    assert made.exit_code == 0, made.output
    assert scalars(tmp_path / "bundle") == {"activation": "relu"}
    # a quoted string is a string too, and a word given to a number is refused
    quoted = new_act_bundle(tmp_path, "quoted", "x", "activation=''")
    assert quoted.exit_code == 0, quoted.output
    assert scalars(tmp_path / "quoted") == {"activation": ""}
    worded = new_act_bundle(tmp_path, "worded", "x", "scale=one")
    assert worded.exit_code == 1
    [line] = worded.stderr.strip().splitlines()
    assert (
        line == "Error: --scalar scale=one: 'one' is not a number, and act declares `scale: float`"
    )
    assert not (tmp_path / "worded").exists()


AUTOTUNED = """
import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["n"])
@triton.jit
def double_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)


def double(x):
    out = torch.empty_like(x)
    grid = lambda META: (triton.cdiv(x.numel(), META["BLOCK"]),)
    double_kernel[grid](x, out, x.numel())
    return out
"""


@pytest.mark.slow
def test_a_kernel_with_an_autotune_list_runs_on_the_interpreter(tmp_path):
    """The Triton matmul tutorial's kernel, as written, has an autotune list of several configs,
    which times them with the GPU driver before the first launch: on the interpreter it raised
    '0 active drivers' and no bundle could be made on a CPU machine. The harness child times the
    configs on the CPU clock there."""
    made = new_double_bundle(tmp_path, AUTOTUNED)
    assert made.exit_code == 0, made.output
    assert "PASS  baseline:build" in made.stdout
