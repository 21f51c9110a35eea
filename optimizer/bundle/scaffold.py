"""A new bundle for the user's own kernel (`tlxdb bundle new`): from a kernel file, its entry
point, a PyTorch reference and the argument shapes, the TLX bundle files (docs/CONTRACT.md
"tlxdb bundle new", docs/TUTORIAL.md).

Invariants:
- Everything the command line says is checked before a file is written: the kernel parses and
  defines the entry point as a plain Python function (not a @triton.jit kernel) or as the apply
  of a torch.autograd.Function subclass it defines (`Fn.apply`, or a top-level name bound to
  it: the Triton tutorials' style), whose parameters are forward's less ctx; anything else the
  name is bound to is refused, saying what it is. Every --shape and --scalar names one of its
  parameters, and every parameter without a default is given; a --scalar is a number, True/False
  or a string (a bare word, or quoted), and a string given to a parameter the entry point
  declares a number (`eps: float`, `eps=1e-6`) is refused; the reference is an expression
  over those names (and torch, F, math, builtins) or FILE.py:FUNC of a file that defines FUNC.
  A bad input is a BundleError of one line.
- The harness is the fixed template templates/harness.py.j2: the entry point's name, an apply's
  argument order and the reference are all that is filled in, so its checks are the same for
  every bundle.
- cases.json gives each case's tensor shapes and dtype and its scalars as `parameters`:
  `{"dtype", "shapes": {name: [dims]}, "dtypes": {name: dtype} (only those that differ),
  "scalars": {name: value}}`; the entry point is called with these arguments by name, an apply
  by position in forward's order (older torch releases refuse keywords there), so no parameter
  before the last one given may be left to its default.
- target.json is this machine's: the GPU torch sees (backend, architecture, device name), else
  the Triton interpreter on the CPU (TRITON_INTERPRET=1 in its environment), whose bundle also
  gets a budget.json (INTERPRETER_BUDGET: a higher max_cv, fewer repetitions).
- The bundle is written into a hidden sibling folder, validated there, and renamed into place
  only when no check fails; an existing non-empty folder is never written into. Nothing is left
  behind on an error.
"""

from __future__ import annotations

import ast
import builtins
import json
import os
import re
import shutil
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, TypeGuard

import jinja2
from pydantic import BaseModel, ConfigDict

from optimizer import pysource
from optimizer.bundle.device import ProbeError, detect_device, probe
from optimizer.bundle.loading import (
    BUDGET,
    CASES,
    HARNESS,
    REFERENCE,
    TARGET,
    BundleError,
    BundlePaths,
    locate,
    read_kernel,
)
from tlxstore.config import settings
from tlxstore.events import DeviceInfo, ValidationCheck
from tlxstore.redaction import without_secrets

TEMPLATES_DIR = Path(__file__).parent / "templates"
Backend = Literal["auto", "cpu", "cuda", "hip"]

# torch dtype names a generated harness can draw and compare (its reference must run in them)
DTYPES = (
    "float64",
    "float32",
    "float16",
    "bfloat16",
    "int64",
    "int32",
    "int16",
    "int8",
    "uint8",
    "bool",
)
REFERENCE_GLOBALS = frozenset({"torch", "F", "math"})  # names the harness imports for it
INTERPRETER_GUIDANCE = (
    "The Triton interpreter runs on the CPU: each loop iteration of the kernel costs a fixed "
    "Python/numpy overhead, so fewer, wider iterations win. num_warps and num_stages have no "
    "effect here. Timings measure the interpreter, not a GPU."
)
# On a CPU shared with other work the interpreter's samples are noisy (CVs of 0.2-0.3 are common
# on 2 busy cores): a budget.json lets their candidates be judged by the speedup's interval, and
# takes 5 samples a case (as the examples' host bundles do: each is 3 slow interpreted calls).
INTERPRETER_BUDGET = {"max_cv": 0.5, "benchmark_repetitions": 5}
_NAME = re.compile(r"^[A-Za-z_]\w*$")
_FILE_FUNCTION = re.compile(r"^(?P<file>.+\.py):(?P<function>[A-Za-z_]\w*)$")
_GPU_PROBE = (
    "import json, torch\n"
    "print(json.dumps({'gpu': torch.cuda.is_available(), 'hip': torch.version.hip is not None}))\n"
)


class BundleRequest(BaseModel):
    """What `tlxdb bundle new` was asked for, as typed (parsed and checked by new_bundle)."""

    model_config = ConfigDict(frozen=True)

    kernel: Path
    entry: str
    reference: str
    shapes: list[str]  # "NAME=D0,D1[:DTYPE]", in order; a name given again starts a new case
    scalars: list[str] = []  # "NAME=VALUE"
    dtype: str = "float32"
    out: Path
    backend: Backend = "auto"


class Validated(Protocol):
    """What the validate function returns (lifecycle.ValidationReport is one)."""

    passed: bool
    device: DeviceInfo
    checks: list[ValidationCheck]


Validate = Callable[[Path, BundlePaths], Validated]


@dataclass(frozen=True)
class NewBundle:
    """What new_bundle did: the bundle's files, whether they were written (not when a check
    failed) and the validation (None when not asked for)."""

    out: Path
    files: list[str]
    written: bool
    validation: Validated | None


# ---- the command line's words -----------------------------------------------------------------


def _dtype(name: str, where: str) -> str:
    if name not in DTYPES:
        raise BundleError(f"{where}: dtype {name!r} is not one of {', '.join(DTYPES)}")
    return name


def parse_cases(shapes: list[str], scalars: list[str], dtype: str) -> list[dict[str, Any]]:
    """cases.json's entries from --shape, --scalar and --dtype (see the module doc)."""
    _dtype(dtype, "--dtype")
    if not shapes:
        raise BundleError("give at least one --shape NAME=D0,D1,... (one per tensor argument)")
    groups: list[dict[str, tuple[list[int], str | None]]] = [{}]
    for text in shapes:
        name, dims, own = _shape(text)
        if name in groups[-1]:
            groups.append({})
        groups[-1][name] = (dims, own)
    names = list(groups[0])
    for i, g in enumerate(groups[1:], 2):
        if set(g) != set(names):
            raise BundleError(
                f"case {i} gives shapes for {', '.join(g)}, case 1 for {', '.join(names)}: "
                "give every tensor argument's --shape once per case"
            )
    values = dict(_scalar(text) for text in scalars)
    clash = sorted(set(values) & set(names))
    if clash:
        raise BundleError(f"{clash[0]} is given both a --shape and a --scalar")
    cases = []
    for g in groups:
        params: dict[str, Any] = {"dtype": dtype, "shapes": {n: g[n][0] for n in names}}
        dtypes = {n: d for n in names if (d := g[n][1]) is not None and d != dtype}
        if dtypes:
            params["dtypes"] = dtypes
        params["scalars"] = values
        cases.append({"case_id": "", "parameters": params, "weight": 1.0, "protected": True})
    _name_cases(cases)
    return cases


def _shape(text: str) -> tuple[str, list[int], str | None]:
    name, eq, rest = text.partition("=")
    dims_text, colon, own = rest.partition(":")
    try:
        dims = [int(d) for d in dims_text.split(",")]
    except ValueError:
        dims = []
    if not eq or not _NAME.match(name.strip()) or not dims or min(dims) < 1:
        raise BundleError(
            f"--shape {text!r}: write NAME=D0,D1,... with positive sizes, e.g. x=4096 or x=8,4096"
            " (NAME=...:DTYPE for a dtype of its own)"
        )
    return name.strip(), dims, _dtype(own.strip(), f"--shape {text}") if colon else None


def _scalar(text: str) -> tuple[str, Any]:
    """One --scalar: a number, True/False, a quoted string, or a bare word, taken as a string
    (`activation=gelu`: the Triton tutorials' ACTIVATION constexpr); anything else is refused
    (`eps=1e-6x` is neither a number nor a word)."""
    name, eq, value = text.partition("=")
    value = value.strip()
    try:
        parsed = ast.literal_eval(value)
    except (ValueError, SyntaxError):
        parsed = value if _NAME.match(value) else None
    if not eq or not _NAME.match(name.strip()) or not isinstance(parsed, int | float | bool | str):
        raise BundleError(
            f"--scalar {text!r}: write NAME=VALUE with a number, True/False or a word (a string "
            "argument), e.g. eps=1e-6 or activation=gelu"
        )
    return name.strip(), parsed


def _name_cases(cases: list[dict[str, Any]]) -> None:
    """Case ids from the shapes: the distinct shapes joined ("8x4096_4096"), or every argument's
    shape ("x=8x4096,w=4096") where that would repeat an id."""

    def dims(d: list[int]) -> str:
        return "x".join(map(str, d))

    def short(c: dict[str, Any]) -> str:
        return "_".join(dict.fromkeys(dims(d) for d in c["parameters"]["shapes"].values()))

    def full(c: dict[str, Any]) -> str:
        return ",".join(f"{n}={dims(d)}" for n, d in c["parameters"]["shapes"].items())

    ids = [short(c) for c in cases]
    for c, short_id in zip(cases, ids, strict=True):
        c["case_id"] = short_id if ids.count(short_id) == 1 else full(c)
    full_ids = [c["case_id"] for c in cases]
    if len(set(full_ids)) != len(full_ids):
        raise BundleError("two cases have the same shapes; give each case once")


# ---- the kernel and the reference ---------------------------------------------------------------


def _is_jit(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    text = ast.unparse(target)
    return text.split(".")[-1] in {"jit", "autotune", "heuristics"}


@dataclass(frozen=True)
class EntryPoint:
    """What --entry names, as the harness calls it: its parameter names ("**" when it takes any
    keyword), those without a default, and whether it is a torch.autograd.Function's apply,
    called by position in forward's order (older torch releases refuse keywords there)."""

    parameters: list[str]
    required: set[str]
    positional: bool
    numbers: dict[str, str] = field(default_factory=dict)  # parameter -> why it is a number


def _numbers(args: ast.arguments) -> dict[str, str]:
    """The parameters declared numbers, by annotation (int, float, bool) or by a number as their
    default, each with that declaration in words, e.g. "`eps: float`"."""
    plain = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(plain) - len(args.defaults))
    pairs = zip(
        [*plain, *args.kwonlyargs], [*defaults, *args.defaults, *args.kw_defaults], strict=True
    )
    out = {}
    for arg, default in pairs:
        if arg.annotation is not None and ast.unparse(arg.annotation) in ("int", "float", "bool"):
            out[arg.arg] = f"`{arg.arg}: {ast.unparse(arg.annotation)}`"
        elif default is not None:
            try:
                value = ast.literal_eval(default)
            except ValueError:
                continue
            if isinstance(value, int | float | bool):
                out[arg.arg] = f"`{arg.arg}={ast.unparse(default)}`"
    return out


ACCEPTED_ENTRIES = (
    "give --entry the Python function that launches the kernel and returns its result (a "
    "top-level def), or the apply of a torch.autograd.Function subclass defined in the file "
    "(Fn.apply, or a name bound to it)"
)


def _lineage(tree: ast.Module, cls: ast.ClassDef) -> list[ast.ClassDef]:
    """`cls` and the classes of the same file it derives from, nearest first (each once)."""
    seen = [cls]
    for node in seen:
        for base in node.bases:
            found = _binding(tree, ast.unparse(base))
            if isinstance(found, ast.ClassDef) and found not in seen:
                seen.append(found)
    return seen


def _is_autograd_function(node: ast.stmt | None, tree: ast.Module) -> TypeGuard[ast.ClassDef]:
    """Whether `node` is a class with a base named Function (torch.autograd.Function), itself
    or through a class of the same file it derives from (`class Fn(_Common)`, `_Common` the
    file's own Function subclass)."""
    return isinstance(node, ast.ClassDef) and any(
        ast.unparse(b).split(".")[-1] == "Function" for c in _lineage(tree, node) for b in c.bases
    )


def _binding(tree: ast.Module, name: str) -> ast.stmt | None:
    """The last top-level statement that binds `name` (a function, class, assignment or
    import), which is what the module's `name` is once imported; None when there is none."""
    found = None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names = [node.name]
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.asname or a.name.split(".")[0] for a in node.names]
        else:
            names = []
        if name in names:
            found = node
    return found


def _found(tree: ast.Module, node: ast.stmt, name: str) -> str:
    """What the kernel file binds `name` to, in words, for a refusal."""
    where = f"(line {node.lineno})"
    if isinstance(node, ast.ClassDef):
        if _is_autograd_function(node, tree):
            return f"defines {name} as a torch.autograd.Function subclass {where}"
        return f"defines {name} as a class {where}, not a torch.autograd.Function subclass"
    if isinstance(node, ast.Import | ast.ImportFrom):
        return f"imports {name} {where}: `{ast.unparse(node)}`"
    value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
    if isinstance(value, ast.Lambda):
        return f"binds {name} to a lambda {where}"
    if isinstance(value, ast.Call):
        return f"binds {name} to a call of {ast.unparse(value.func)} {where}"
    if isinstance(value, ast.Attribute) and value.attr == "apply":
        owner = ast.unparse(value.value)
        return (
            f"binds {name} to {owner}.apply {where}, and defines no torch.autograd.Function "
            f"subclass {owner}"
        )
    text = ast.unparse(node)
    return f"binds {name} as `{text if len(text) <= 60 else text[:57] + '...'}` {where}"


def _apply_parameters(tree: ast.Module, cls: ast.ClassDef, entry: str) -> EntryPoint:
    """The parameters of `cls.apply`: forward's positional ones, less ctx (forward has none
    where the class defines setup_context); forward and setup_context as `cls` has them, its own
    or those of the file's classes it derives from."""
    methods = {
        n.name: n
        for c in reversed(_lineage(tree, cls))
        for n in c.body
        if isinstance(n, ast.FunctionDef)
    }
    if "forward" not in methods:
        raise BundleError(f"{entry}: {cls.name} defines no forward, so its apply launches nothing")
    a = methods["forward"].args
    positional = [p.arg for p in [*a.posonlyargs, *a.args]]
    required = positional[: len(positional) - len(a.defaults)]
    skip = 0 if "setup_context" in methods else 1
    return EntryPoint(positional[skip:], set(required[skip:]), positional=True, numbers=_numbers(a))


def entry_parameters(source: str, entry: str, kernel_name: str) -> EntryPoint:
    """The parameters of `entry`: a top-level function of the kernel source, `Fn.apply` of a
    torch.autograd.Function subclass Fn it defines, or a top-level name bound to such an apply.
    Anything else is refused, saying what the file binds the name to."""
    tree = pysource.parse(source)
    owner, dot, attribute = entry.partition(".")
    node = _binding(tree, owner)
    if dot:
        if attribute == "apply" and _is_autograd_function(node, tree):
            return _apply_parameters(tree, node, entry)
        found = f"defines no {owner}" if node is None else _found(tree, node, owner)
        raise BundleError(f"--entry {entry}: {kernel_name} {found}; {ACCEPTED_ENTRIES}")
    if node is None:
        raise BundleError(f"{kernel_name} defines no function {entry}; {ACCEPTED_ENTRIES}")
    if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Attribute):
        cls = _binding(tree, ast.unparse(node.value.value))
        if node.value.attr == "apply" and _is_autograd_function(cls, tree):
            return _apply_parameters(tree, cls, entry)
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        raise BundleError(f"{kernel_name} {_found(tree, node, entry)}; {ACCEPTED_ENTRIES}")
    if any(_is_jit(d) for d in node.decorator_list):
        raise BundleError(
            f"{entry} is a Triton kernel (@{ast.unparse(node.decorator_list[0])}); give --entry "
            "the Python function that launches it and returns its result"
        )
    a = node.args
    if a.posonlyargs:
        raise BundleError(
            f"{entry} has positional-only parameters ({', '.join(p.arg for p in a.posonlyargs)}); "
            "the harness passes arguments by name"
        )
    positional = [p.arg for p in a.args]
    required = set(positional[: len(positional) - len(a.defaults)])
    required |= {p.arg for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is None}
    names = positional + [p.arg for p in a.kwonlyargs]
    if a.kwarg is not None:
        names.append("**")
    return EntryPoint(names, required, positional=False, numbers=_numbers(a))


def _check_arguments(given: list[str], params: list[str], required: set[str], entry: str) -> None:
    unknown = [n for n in given if n not in params and "**" not in params]
    if unknown:
        raise BundleError(
            f"{entry} has no parameter {unknown[0]} (its parameters: "
            f"{', '.join(p for p in params if p != '**') or 'none'})"
        )
    missing = sorted(required - set(given))
    if missing:
        raise BundleError(
            f"{entry}'s parameter {missing[0]} is given no --shape or --scalar (every parameter "
            "without a default needs one)"
        )


def _check_words(scalars: dict[str, Any], entry: EntryPoint, name: str) -> None:
    """A word given to a parameter the entry point declares a number is refused: `eps=le-6`
    would reach the kernel as the string 'le-6'."""
    for scalar, value in scalars.items():
        if isinstance(value, str) and scalar in entry.numbers:
            raise BundleError(
                f"--scalar {scalar}={value}: {value!r} is not a number, and {name} declares "
                f"{entry.numbers[scalar]}"
            )


def _positional(given: list[str], entry: EntryPoint, name: str) -> list[str]:
    """The order an apply is called in: its parameters up to the last one given. One before it
    that is not given cannot be skipped by position (its default lies in forward, which the
    harness does not read), so it is refused."""
    last = max(entry.parameters.index(n) for n in given)
    skipped = [p for p in entry.parameters[:last] if p not in given]
    if skipped:
        raise BundleError(
            f"{name} takes its arguments by position (a torch.autograd.Function's apply), so "
            f"{skipped[0]}, before {entry.parameters[last]}, needs a --shape or --scalar too"
        )
    return entry.parameters[: last + 1]


def _expression(text: str, arguments: list[str]) -> str:
    """The reference expression, checked: it parses and names only the arguments, torch, F,
    math and builtins. Returned as one line of normalized Python."""
    try:
        module = pysource.parse(text.strip())
        if len(module.body) != 1 or not isinstance(module.body[0], ast.Expr):
            raise SyntaxError("not one expression")
    except SyntaxError as e:
        raise BundleError(
            f"--reference {text!r} is not a Python expression ({e.msg}); give one such as "
            "torch.add(x, y), or FILE.py:FUNC"
        ) from None
    tree = module.body[0]
    bound = {
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    bound |= {a.arg for n in ast.walk(tree) if isinstance(n, ast.Lambda) for a in n.args.args}
    known = set(arguments) | REFERENCE_GLOBALS | bound | set(dir(builtins))
    unknown = sorted(
        {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        - known
    )
    if unknown:
        raise BundleError(
            f"--reference names {unknown[0]}, which is no argument ({', '.join(arguments)}) nor "
            "torch, F (torch.nn.functional) or math"
        )
    return ast.unparse(tree.value)


def _reference_file(text: str) -> tuple[Path, str] | None:
    """(file, function) of a FILE.py:FUNC reference whose file exists, else None."""
    m = _FILE_FUNCTION.match(text.strip())
    if m is None or not Path(m["file"]).is_file():
        return None
    path, function = Path(m["file"]), m["function"]
    try:
        tree = pysource.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError, OSError) as e:
        raise BundleError(f"--reference file {path} cannot be read as Python: {e}") from None
    if not any(isinstance(n, ast.FunctionDef) and n.name == function for n in tree.body):
        raise BundleError(f"--reference file {path} defines no function {function}")
    return path, function


# ---- the target ---------------------------------------------------------------------------------


def detect_target(backend: Backend, python: str, env: dict[str, str]) -> dict[str, Any]:
    """target.json for this machine: its GPU (as torch sees it, in a child process) unless
    backend is cpu; the Triton interpreter on the CPU when no GPU is seen (auto) or asked."""
    if backend == "auto":
        try:
            seen = probe(python, _GPU_PROBE, env)
        except ProbeError as e:
            raise BundleError(f"cannot ask torch for a GPU: {e}") from None
        backend = ("hip" if seen["hip"] else "cuda") if seen["gpu"] else "cpu"
    if backend == "cpu":
        return {
            "backend": "cpu",
            "architecture": "triton-interpreter",
            "device": "cpu",
            "environment": {"TRITON_INTERPRET": "1"},
            "optimization_guidance": INTERPRETER_GUIDANCE,
        }
    device = detect_device(backend, {}, python, env)
    return {
        "backend": backend,
        "architecture": device.architecture or "",
        "device": device.kind,
        "environment": {},
        "optimization_guidance": "",
    }


# ---- writing ------------------------------------------------------------------------------------


def render_harness(
    entry: str, kernel_name: str, arguments: list[str], reference: str, positional: list[str]
) -> str:
    """harness.py from the template, for an expression reference or (FILE.py:FUNC) a function
    of reference_kernel.py; an entry point called with its arguments by name, or (`positional`
    not empty: an autograd Function's apply) in that order."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    file_reference = _FILE_FUNCTION.match(reference.strip())
    return env.get_template("harness.py.j2").render(
        entry=entry,
        entry_literal=repr(entry),
        kernel_name=kernel_name,
        arguments=arguments,
        positional=tuple(positional),
        reference_function=file_reference["function"] if file_reference else "",
        reference_expression="" if file_reference else reference,
    )


def _refuse_existing(out: Path) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise BundleError(
            f"{out} already exists; tlxdb bundle new never overwrites a bundle (choose another "
            "--out, or remove it)"
        )


def new_bundle(request: BundleRequest, validate: Validate | None) -> NewBundle:
    """Check the request, write the bundle's files into a hidden sibling of `request.out`, run
    `validate(kernel, paths)` on them (unless None) and move them into place when no check
    failed (module doc)."""
    out = request.out.resolve()
    _refuse_existing(out)
    kernel = request.kernel.resolve()
    source = read_kernel(kernel)
    cases = parse_cases(request.shapes, request.scalars, request.dtype)
    params = cases[0]["parameters"]
    arguments = [*params["shapes"], *params["scalars"]]
    entry = entry_parameters(source, request.entry, kernel.name)
    _check_arguments(arguments, entry.parameters, entry.required, request.entry)
    _check_words(params["scalars"], entry, request.entry)
    positional = _positional(arguments, entry, request.entry) if entry.positional else []
    ref_file = _reference_file(request.reference)
    expression = None if ref_file else _expression(request.reference, arguments)
    target = detect_target(
        request.backend, settings().child_python or sys.executable, without_secrets(os.environ)
    )
    harness = render_harness(
        request.entry,
        kernel.name,
        arguments,
        f"{ref_file[0]}:{ref_file[1]}" if ref_file else expression or "",
        positional,
    )
    files = {
        HARNESS: harness,
        CASES: "[\n" + ",\n".join(f"  {json.dumps(c)}" for c in cases) + "\n]\n",
        TARGET: json.dumps(target, indent=2) + "\n",
    }
    if target["backend"] == "cpu":
        files[BUDGET] = json.dumps(INTERPRETER_BUDGET, indent=2) + "\n"
    if ref_file:
        files[REFERENCE] = ref_file[0].read_text(encoding="utf-8")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.parent / f".{out.name}.new-{uuid.uuid4().hex[:8]}"
    try:
        staging.mkdir()
        for name, text in files.items():
            (staging / name).write_text(text, encoding="utf-8")
        report = validate(kernel, locate(staging)) if validate is not None else None
        if report is not None and not report.passed:
            return NewBundle(out=out, files=list(files), written=False, validation=report)
        _refuse_existing(out)  # again: it may have appeared while validation ran
        if out.exists():
            out.rmdir()
        staging.rename(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return NewBundle(out=out, files=list(files), written=True, validation=report)
