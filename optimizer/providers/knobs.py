"""A kernel's launch and compile knobs, found by reading its source (AST), and rewritten in place.

What counts as a knob (each an integer literal the source states, or a default it could state):
- a `tl.constexpr` argument at a launch site `kernel[grid](..., BLOCK=128)` (keyword or
  positional), and `num_warps` / `num_stages` there (absent ones are knobs at Triton's default,
  rewritten by inserting the keyword); a launch `kern[grid](...)` through a name bound once to a
  kernel or to `a if c else b` of kernels is a launch of each;
- a module-level or function-local constant that feeds one of those (`BLOCK = 256` ...
  `BLOCK=BLOCK`): the knob is the constant, named after it;
- the `triton.Config` list of `@triton.autotune`: a one-config list gives its keys, `num_warps`
  and `num_stages` as knobs; a longer list is an `AutotuneChoice` (pinning one of its configs is
  a move; once pinned, the config's values are knobs);
- a value the source computes at run time (a block, num_warps, num_stages): one knob per value
  the observed launches showed it computing (`BLOCK_SIZE[1024]`, `BLOCK_SIZE[4096]`), rewritten
  as a table keyed by the computed value, wherever the value is read: a variable's every read
  (the grid's `triton.cdiv(n, BLOCK_SIZE)` too), so the grid and the launch see one value. A
  computed value the grid divides by another way cannot be rewritten so: it is unreadable.

Invariants:
- `apply_knobs(source, values)` changes only the literals (or inserts only the keywords) of the
  knobs whose value changes; every other byte of the source is kept, so a diff shows one change.
- Rewriting is independent of the path: applying a full configuration to any source with the
  same skeleton gives the same text, so a configuration has one source text per skeleton.
- A source that does not parse raises KnobError; a source without knobs has an empty space.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict

from optimizer import pysource
from optimizer.providers.knob_sites import (
    Scope,
    binder,
    caller_literals,
    definition,
    dict_items,
    divisors,
    generated_configs,
    grid_parts,
    helper_returns,
    names_read,
    parents_of,
    reads,
    returned,
    scan,
    table,
)
from tlxstore.errors import TlxdbError

# Triton's launch defaults (triton.Config and the JIT launcher use the same ones on CUDA).
DEFAULT_NUM_WARPS = 4
DEFAULT_NUM_STAGES = 3
_COMPILE_KWARGS = {"num_warps", "num_stages"}


class KnobError(TlxdbError):
    """The kernel source cannot be read for knobs."""


class KnobRole(StrEnum):
    """What a knob controls; it decides the knob's domain and constraints."""

    BLOCK = "block"  # a tile/block size (fed to tl.arange or named BLOCK/TILE): a power of two
    WARPS = "num_warps"
    STAGES = "num_stages"
    INTEGER = "integer"  # another integer constexpr (GROUP_M ...)


class KnobOrigin(StrEnum):
    LAUNCH = "launch"  # a literal at a launch site
    CONSTANT = "constant"  # a constant feeding a launch or a config: an assignment (plain or
    # tuple), a default argument, a helper's literal return, a dict splatted with **, a caller's
    # literal argument of the function that launches
    AUTOTUNE = "autotune"  # a value of the single triton.Config of an autotune list
    HEURISTIC = "heuristic"  # a literal returned by a @triton.heuristics lambda
    COMPUTED = "computed"  # computed at run time, its values observed at the launches: rewritten
    # as a table keyed by the computed value (`{8: 16, 4: 8}.get(nw, nw)`), one knob per key, so
    # every shape the cases do not have keeps what the computation gives


class Site(BaseModel):
    """Where a knob's value lives: source[start:end] (UTF-8 byte offsets) is replaced by
    `prefix + str(value) + suffix`. An insertion site has start == end and a prefix like
    ", num_warps=". A computed value's site is one entry of a table: `key` (what the computation
    gave) and `plain` (the computation's text); the knobs of every key share the span (one per
    read of the value), which `table_text` renders from all their values (see apply_knobs)."""

    model_config = ConfigDict(frozen=True)

    start: int
    end: int
    prefix: str = ""
    suffix: str = ""
    key: int | None = None
    plain: str = ""

    def render(self, value: int) -> str:
        return f"{self.prefix}{value}{self.suffix}"


def table_text(plain: str, entries: Mapping[int, int]) -> str:
    """`{k1: v1, k2: v2}.get(E, E)` over the computation E (keys sorted, entries that keep the
    computed value left out), or E itself when no entry changes it: one text per configuration,
    whatever the path."""
    changed = [f"{k}: {v}" for k, v in sorted(entries.items()) if k != v]
    return f"{{{', '.join(changed)}}}.get({plain}, {plain})" if changed else plain


class Knob(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    value: int
    role: KnobRole
    origin: KnobOrigin
    kernel: str  # the @triton.jit function it configures
    # The other kernels it configures: those a launch through a variable may launch (`kern =
    # _a if c else _b`: its arguments are theirs too), another kernel's launch of one constant.
    also: list[str] = []
    sites: list[Site]
    explicit: bool = True  # False: not written in the source (a Triton default)
    loop_step: bool = False  # the kernel walks a loop in steps of this value
    # A launch's grid divides the problem by this knob (`triton.cdiv(n, BLOCK)`,
    # `meta["BLOCK"]`): changing it changes the number of programs. False for a grid that does
    # not read it (one program per row: `(n_rows,)`) and for a grid tune cannot read.
    grid_follows: bool = False
    # A computed value's knob: the kernel parameter its table sets, and the key it sets it for
    # (what the computation gave); the launches where the computation gives another value
    # are another knob's.
    param: str | None = None
    key: int | None = None


class KernelInfo(BaseModel):
    """What the AST says about one @triton.jit function."""

    model_config = ConfigDict(frozen=True)

    name: str
    params: list[str]
    constexpr_params: list[str]
    arange_params: list[str]  # constexpr params used inside tl.arange(...)
    loop_step_params: list[str]  # constexpr params used as the step of a range(...) loop
    uses_dot: bool


class AutotuneChoice(BaseModel):
    """An autotune list of several configs; pinning config i replaces the list with it alone."""

    model_config = ConfigDict(frozen=True)

    kernel: str
    configs: list[dict[str, int]]  # per config: its constexpr values plus num_warps/num_stages
    site: Site  # the list expression


class KnobSpace(BaseModel):
    model_config = ConfigDict(frozen=True)

    knobs: list[Knob] = []
    kernels: dict[str, KernelInfo] = {}
    autotune_choices: list[AutotuneChoice] = []
    unreadable: list[str] = []  # one line per knob that cannot be rewritten, with the reason
    # Per distinct observed launch of a kernel with computed knobs: the names of the computed
    # knobs that set it (a launch uses one key of each table).
    launches: list[list[str]] = []

    def values(self) -> dict[str, int]:
        return {k.name: k.value for k in self.knobs}

    def by_name(self) -> dict[str, Knob]:
        return {k.name: k for k in self.knobs}


# ---- reading --------------------------------------------------------------------------------


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= 80 else line[:77] + "..."


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Call):
        return _dotted(node.func)
    return ""


def _int_literal(node: ast.AST | None) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def _is_jit(fn: ast.FunctionDef) -> bool:
    names = {_dotted(d).split(".")[-1] for d in fn.decorator_list}
    return bool(names & {"jit", "autotune", "heuristics"})


def _is_constexpr(annotation: ast.AST | None) -> bool:
    return annotation is not None and _dotted(annotation).split(".")[-1] == "constexpr"


def _kernel_info(fn: ast.FunctionDef) -> KernelInfo:
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs]
    constexpr = [
        a.arg
        for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
        if _is_constexpr(a.annotation)
    ]
    arange: set[str] = set()
    loop_step: set[str] = set()
    uses_dot = False
    for node in ast.walk(fn):
        if not isinstance(node, ast.Call):
            continue
        callee = _dotted(node.func).split(".")[-1]
        if callee == "dot":
            uses_dot = True
        if callee == "arange":
            for arg in node.args:
                arange |= {n.id for n in ast.walk(arg) if isinstance(n, ast.Name)}
        if callee in {"range", "static_range"} and len(node.args) >= 3:
            loop_step |= {n.id for n in ast.walk(node.args[2]) if isinstance(n, ast.Name)}
    return KernelInfo(
        name=fn.name,
        params=params,
        constexpr_params=constexpr,
        arange_params=sorted(arange & set(constexpr)),
        loop_step_params=sorted(loop_step & set(constexpr)),
        uses_dot=uses_dot,
    )


class _Offsets:
    """AST (line, column) positions to UTF-8 byte offsets of the whole source."""

    def __init__(self, data: bytes) -> None:
        self.line_starts = [0]
        for i, b in enumerate(data):
            if b == 0x0A:
                self.line_starts.append(i + 1)

    def start(self, node: ast.AST) -> int:
        return self.line_starts[node.lineno - 1] + node.col_offset  # type: ignore[attr-defined]

    def end(self, node: ast.AST) -> int:
        return self.line_starts[node.end_lineno - 1] + node.end_col_offset  # type: ignore[attr-defined]


def _role(name: str, kernel: KernelInfo | None, param: str) -> KnobRole:
    if param == "num_warps":
        return KnobRole.WARPS
    if param == "num_stages":
        return KnobRole.STAGES
    if kernel is not None and param in kernel.arange_params:
        return KnobRole.BLOCK
    if re.search(r"BLOCK|TILE", param.upper()) or re.search(r"BLOCK|TILE", name.upper()):
        return KnobRole.BLOCK
    return KnobRole.INTEGER


Observed = tuple[tuple[str, tuple[tuple[str, int], ...]], ...]
"""What launches observed at run time: one (kernel, ((parameter, value), ...)) per distinct
launch (optimizer.evaluation.launches.observed_values), the values of what the source computes."""


class _Collector:
    def __init__(self, source: str, observed: Observed = ()) -> None:
        try:
            self.tree = pysource.parse(source)
        except (SyntaxError, ValueError) as e:
            raise KnobError(f"the kernel source does not parse: {e}") from e
        self.data = source.encode("utf-8")
        self.source = source
        self.off = _Offsets(self.data)
        self.kernels: dict[str, KernelInfo] = {}
        self.jit_defs: dict[str, ast.FunctionDef] = {}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.FunctionDef) and _is_jit(node):
                self.kernels[node.name] = _kernel_info(node)
                self.jit_defs[node.name] = node
        self.helpers = helper_returns(self.tree, set(self.jit_defs))
        self.module = scan(self.tree.body, self.helpers)
        self.module_exprs: dict[str, ast.expr] = {}
        for stmt in self.tree.body:
            if (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
            ):
                self.module_exprs[stmt.targets[0].id] = stmt.value
        self.observed = observed
        self.launched: dict[tuple[str, str], set[int]] = {}  # (kernel, parameter) -> values
        for kernel, values in observed:
            for param, value in values:
                self.launched.setdefault((kernel, param), set()).add(value)
        self.knobs: dict[str, Knob] = {}
        self.choices: list[AutotuneChoice] = []
        self.unreadable: list[str] = []
        self.autotuned: set[str] = set()  # kernels with an @triton.autotune decorator
        self.covered: set[tuple[str, str]] = set()  # (kernel, parameter) some knob sets
        self.reported: set[str] = set()  # kernels (or kernel.parameter) already unreadable
        self.parents = parents_of(self.tree)
        # (kernel, a `kernel[grid](...)` of it); a launch through a variable bound to several
        # kernels (`kern = _a if c else _b`) is one pair per kernel
        self.launch_calls: list[tuple[str, ast.Call]] = []
        self.untraced: list[ast.Call] = []  # `x[grid](...)` calls tune traces to no kernel
        self.params: dict[str, set[str]] = {}  # knob name -> the parameters it sets

    # A knob found at several sites with the same value is one knob; different values are not.
    def _add(
        self,
        name: str,
        value: int,
        role: KnobRole,
        origin: KnobOrigin,
        kernel: str,
        site: Site | list[Site],
        explicit: bool = True,
        param: str | None = None,
        key: int | None = None,
    ) -> None:
        self.covered.add((kernel, param or name))
        sites = site if isinstance(site, list) else [site]
        info = self.kernels.get(kernel)
        loop_step = info is not None and bool({name, param} & set(info.loop_step_params))
        existing = self.knobs.get(name)
        if existing is not None:
            same_site = existing.sites[0] == sites[0]
            if same_site or (existing.value == value and existing.explicit == explicit):
                known = kernel == existing.kernel or kernel in existing.also
                self.knobs[name] = existing.model_copy(
                    update={
                        "sites": existing.sites if same_site else [*existing.sites, *sites],
                        "loop_step": existing.loop_step or loop_step,
                        "also": existing.also if known else [*existing.also, kernel],
                    }
                )
                self.params[name].add(param or name)
                return
            name = f"{kernel}.{name}"
            if name in self.knobs:
                return
        self.params[name] = {param or name}
        self.knobs[name] = Knob(
            name=name,
            value=value,
            role=role,
            origin=origin,
            kernel=kernel,
            sites=sites,
            explicit=explicit,
            loop_step=loop_step,
            param=param if key is not None else None,
            key=key,
        )

    def _literal_site(self, node: ast.AST) -> Site:
        return Site(start=self.off.start(node), end=self.off.end(node))

    def _resolve(
        self,
        expr: ast.expr,
        scope: Scope,
        fn: ast.FunctionDef | ast.AsyncFunctionDef | None = None,
    ) -> tuple[str | None, int, list[Site], KnobOrigin] | None:
        """(name or None, value, sites, origin) of the literal(s) that give `expr` its value."""
        value = _int_literal(expr)
        if value is not None:
            return None, value, [self._literal_site(expr)], KnobOrigin.LAUNCH
        if not isinstance(expr, ast.Name):
            return None
        const = scope.consts.get(expr.id)
        value = _int_literal(const)
        if const is not None and value is not None:
            return expr.id, value, [self._literal_site(const)], KnobOrigin.CONSTANT
        params = [] if fn is None else [a.arg for a in fn.args.posonlyargs + fn.args.args]
        if fn is not None and expr.id in params:
            literals = caller_literals(self.tree, fn, expr.id)
            values = {v for x in literals or [] if (v := _int_literal(x)) is not None}
            if literals and len(values) == 1:
                sites = list(dict.fromkeys(self._literal_site(x) for x in literals))
                return expr.id, values.pop(), sites, KnobOrigin.CONSTANT
        return None

    def _computed(
        self, kernel: str, param: str, expr: ast.expr, launch: ast.Call | None = None
    ) -> None:
        """A value computed at run time (or a table over it a rewrite left): one knob per value
        the computation gave, from the observed launches and the table's keys, its table written
        wherever `launch` and its grid read the value (_value_sites). Only blocks, num_warps
        and num_stages: another computed constexpr (`n_cols=n_cols`) is a problem size the
        kernel specializes on, not a setting."""
        found = table(expr)
        entries, computation = (dict(found[0]), found[1]) if found is not None else ({}, expr)
        text = ast.get_source_segment(self.source, computation) or ast.unparse(computation)
        name = computation.id if isinstance(computation, ast.Name) else param
        role = _role(name, self.kernels[kernel], param)
        if not entries and param not in _COMPILE_KWARGS and role != KnobRole.BLOCK:
            return
        self.reported.add(f"{kernel}.{param}")
        # the kernels one launch may launch (`kern = _a if c else _b`) share its arguments: the
        # values any of them showed there are the keys of one table
        site = [k for k, c in self.launch_calls if c is launch] or [kernel]
        shown = [self.launched.get((k, param), set()) for k in site]
        keys = sorted(set(entries).union(*shown))
        if not keys:
            if kernel == site[0]:  # one line for the launch, not one per kernel
                self.unreadable.append(
                    f"{kernel}.{param}: computed at run time ({_one_line(text)}) and no launch "
                    f"of {' or '.join(site)} was observed"
                )
            return
        at = self._value_sites(kernel, param, expr, computation, launch)
        if at is None:
            return
        for key in keys:
            self._add(
                f"{name}[{key}]",
                entries.get(key, key),
                role,
                KnobOrigin.COMPUTED,
                kernel,
                [self._table_site(node, computation, key) for node in at],
                param=param,
                key=key,
            )

    def _value_sites(
        self,
        kernel: str,
        param: str,
        expr: ast.expr,
        computation: ast.expr,
        launch: ast.Call | None,
    ) -> list[ast.expr] | None:
        """Where the table of a computed value is written. A table at the launch's keyword
        alone leaves the grid at the computed value: `BLOCK=B` with the grid
        `triton.cdiv(n, B)` and B 256 → 1024 launched a quarter of the programs' blocks past
        the end (1024-wide blocks, 79 programs for n=20000, three quarters masked). So:
        - `BLOCK=B`, B a name: every read of B in the scope that binds it (the grid's, a
          buffer sized by it) gets the table; changing B wherever it is read is changing B;
        - `BLOCK=E`, E an expression: E and each copy of it in the grid. A grid that divides
          by something else E reads (`BLOCK=min(B, 1024)`, grid `triton.cdiv(n, B)`) cannot
          follow a table over E: the value is unreadable (None), not rewritten out of step.
        A heuristic's value (no `launch`) reaches the grid as meta, which it sets."""
        if launch is None:
            return [expr]
        if isinstance(computation, ast.Name):
            scope = binder(computation, computation.id, self.parents)
            return self._tables_over([expr, *reads(scope, computation.id, set(self.jit_defs))])
        same = ast.dump(computation)
        parts = grid_parts(launch, self.parents)
        copies = [
            n
            for part in parts
            for n in ast.walk(part)
            if isinstance(n, ast.expr) and ast.dump(n) == same
        ]
        theirs = names_read(computation)
        for part in parts:
            for divisor in divisors(part):
                if any(ast.dump(n) == same for n in ast.walk(divisor)):
                    continue
                if names_read(divisor) & theirs:
                    text = ast.get_source_segment(self.source, computation) or ""
                    self.unreadable.append(
                        f"{kernel}.{param}: computed at the launch ({_one_line(text)}) while its "
                        f"grid divides by {_one_line(ast.unparse(divisor))}; a rewrite of one "
                        "would leave the other out of step"
                    )
                    return None
        return self._tables_over([expr, *copies])

    def _tables_over(self, nodes: list[ast.expr]) -> list[ast.expr]:
        """`nodes` in source order, each one that is the keyed expression of a table a rewrite
        left (`{256: 1024}.get(B, B)`) replaced by that table, once."""
        out: dict[tuple[int, int], ast.expr] = {}
        for node in nodes:
            parent = self.parents.get(node)
            if isinstance(parent, ast.Call) and node in parent.args and table(parent) is not None:
                node = parent
            out.setdefault((self.off.start(node), self.off.end(node)), node)
        return [out[span] for span in sorted(out)]

    def _unseen_blocks(self) -> None:
        """A block constexpr the launches showed that no knob sets (a `**cfg` tune cannot read,
        a launch tune cannot trace to the kernel) is unreadable: the search would be blind to
        it."""
        for (kernel, param), values in sorted(self.launched.items(), key=lambda kv: kv[0]):
            info = self.kernels.get(kernel)
            if info is None or param in _COMPILE_KWARGS or (kernel, param) in self.covered:
                continue
            if kernel in self.reported or f"{kernel}.{param}" in self.reported:
                continue
            if _role(param, info, param) != KnobRole.BLOCK:
                continue
            shown = " and ".join(f"{param}={v}" for v in sorted(values))
            self.unreadable.append(
                f"{kernel}.{param}: launched with {shown}, but no literal in the source sets it"
                f"{self._how_passed(kernel, param)}"
            )

    def _how_passed(self, kernel: str, param: str) -> str:
        """Why no knob sets `param` of `kernel`, as a clause: a launch of it hides its
        arguments (a `**name`), its launches leave the parameter out, or no launch in the file
        is one tune traces to it (the kernel is launched through a name tune cannot follow, or
        from another file)."""
        calls = [call for k, call in self.launch_calls if k == kernel]
        for call in calls:
            hidden = [f"**{ast.unparse(kw.value)}" for kw in call.keywords if kw.arg is None]
            hidden += [f"*{ast.unparse(a.value)}" for a in call.args if isinstance(a, ast.Starred)]
            if hidden:
                return f" (the launch passes {hidden[0]}, which tune cannot trace to a literal)"
        if calls:
            return f" (the launch at line {calls[0].lineno} does not pass {param})"
        if self.untraced:
            call = self.untraced[0]
            assert isinstance(call.func, ast.Subscript)
            return (
                f" (tune traces no launch in this file to {kernel}: it cannot tell which kernel "
                f"{_one_line(ast.unparse(call.func.value))}[...] at line {call.lineno} launches; "
                "it follows a kernel's name, or a name bound once to a kernel or to "
                "`a if c else b` of kernels)"
            )
        return f" (no launch of {kernel} is in this file: it is launched from another file)"

    def _table_site(self, expr: ast.expr, computation: ast.expr, key: int) -> Site:
        """The entry `key` of the table a computed value becomes: `expr` (a read of the
        computation E, or a table over it) is rewritten as `{key: value, ...}.get(E, E)`
        (table_text)."""
        text = ast.get_source_segment(self.source, computation) or ast.unparse(computation)
        if "\n" in text:
            text = ast.unparse(computation)
        return Site(start=self.off.start(expr), end=self.off.end(expr), key=key, plain=text)

    def _launch_sets(self) -> list[list[str]]:
        """Per distinct observed launch, the computed knobs that set it (see KnobSpace)."""
        keyed = [k for k in self.knobs.values() if k.key is not None]
        out: list[list[str]] = []
        for kernel, values in self.observed:
            given = dict(values)
            names = [
                k.name
                for k in keyed
                if kernel in (k.kernel, *k.also) and given.get(k.param or "") == k.key
            ]
            if names and names not in out:
                out.append(names)
        return out

    def collect(self) -> KnobSpace:
        self._collect_autotune()
        self._collect_heuristics()
        self._collect_launches(self.tree.body, self.module, None)
        self._unseen_blocks()
        self._grid_follows()
        return KnobSpace(
            knobs=list(self.knobs.values()),
            kernels=self.kernels,
            autotune_choices=self.choices,
            unreadable=self.unreadable,
            launches=self._launch_sets(),
        )

    def _grid_follows(self) -> None:
        """Marks the knobs a launch's grid divides the problem by (Knob.grid_follows)."""
        divided: dict[str, set[str]] = {}
        for kernel, launch in self.launch_calls:
            for part in grid_parts(launch, self.parents):
                for divisor in divisors(part):
                    divided.setdefault(kernel, set()).update(names_read(divisor))
        for name, knob in list(self.knobs.items()):
            own = {name.split("[")[0].split(".")[-1], *self.params.get(name, ())}
            if own & divided.get(knob.kernel, set()):
                self.knobs[name] = knob.model_copy(update={"grid_follows": True})

    def _collect_launches(
        self,
        body: list[ast.stmt],
        scope: Scope,
        fn: ast.FunctionDef | ast.AsyncFunctionDef | None,
    ) -> None:
        for stmt in body:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                if stmt.name not in self.jit_defs:
                    self._collect_launches(stmt.body, scope.inner(stmt, self.helpers), stmt)
                continue
            if isinstance(stmt, ast.ClassDef):
                self._collect_launches(stmt.body, scope, None)
                continue
            nested = [n for n in ast.walk(stmt) if isinstance(n, ast.FunctionDef)]
            for node in ast.walk(stmt):
                if isinstance(node, ast.Call) and not any(
                    node in ast.walk(f) for f in nested if f is not stmt
                ):
                    self._launch(node, scope, fn)
            for f in nested:  # functions defined inside an if/with/for
                if f.name not in self.jit_defs:
                    self._collect_launches(f.body, scope.inner(f, self.helpers), f)

    def _launch_args(
        self, call: ast.Call, info: KernelInfo, scope: Scope
    ) -> list[tuple[str, ast.expr]]:
        args: list[tuple[str, ast.expr]] = []
        if not any(isinstance(a, ast.Starred) for a in call.args):
            args += [(p, a) for p, a in zip(info.params, call.args, strict=False)]
        args += [(kw.arg, kw.value) for kw in call.keywords if kw.arg is not None]
        for kw in call.keywords:
            if kw.arg is None and isinstance(kw.value, ast.Name):
                args += dict_items(scope.dicts.get(kw.value.id)) or []
        return args

    def _kernels_of(self, expr: ast.expr, depth: int = 4) -> list[str]:
        """The @triton.jit functions of this file that `expr[grid](...)` launches: `expr` names
        one, or is a name its scope binds once (`depth` names deep) to one (`kern = _fwd`) or
        to a conditional expression of them (`kern = _a if c else _b`, nested too), each
        branch launched. [] for anything else (a parameter, a dict lookup, a name bound in
        if/else branches): tune cannot tell what it launches."""
        if (name := _dotted(expr)) in self.kernels:
            return [name]
        if isinstance(expr, ast.IfExp):
            branches = [self._kernels_of(e, depth) for e in (expr.body, expr.orelse)]
            return list(dict.fromkeys(branches[0] + branches[1])) if all(branches) else []
        value = definition(expr, self.parents) if isinstance(expr, ast.Name) and depth else None
        return [] if value is None else self._kernels_of(value, depth - 1)

    def _launch(
        self,
        call: ast.Call,
        scope: Scope,
        fn: ast.FunctionDef | ast.AsyncFunctionDef | None,
    ) -> None:
        """A launch `x[grid](...)`: of each kernel x may be, as if it named the kernel. The
        kernels the launches showed come first: a knob of the launch they share is theirs
        (Knob.kernel, whose time orders the search), the others' too (Knob.also)."""
        if not isinstance(call.func, ast.Subscript):
            return
        kernels = self._kernels_of(call.func.value)
        if not kernels:
            self.untraced.append(call)
            return
        kernels.sort(key=lambda k: k not in {kernel for kernel, _ in self.launched})
        self.launch_calls += [(k, call) for k in kernels]
        for kernel in kernels:
            self._launch_kernel(kernel, call, scope, fn)

    def _launch_kernel(
        self,
        kernel_name: str,
        call: ast.Call,
        scope: Scope,
        fn: ast.FunctionDef | ast.AsyncFunctionDef | None,
    ) -> None:
        info = self.kernels[kernel_name]
        autotuned = kernel_name in self.autotuned
        args = self._launch_args(call, info, scope)
        given = {p for p, _ in args}
        for param, expr in args:
            if param not in info.constexpr_params and param not in _COMPILE_KWARGS:
                continue
            found = self._resolve(expr, scope, fn)
            if found is None:
                self._computed(kernel_name, param, expr, call)
                continue
            const_name, value, sites, origin = found
            name = const_name or param
            self._add(
                name, value, _role(name, info, param), origin, kernel_name, sites, param=param
            )
        splats = [kw.value for kw in call.keywords if kw.arg is None]
        if autotuned:
            return  # the autotuner decides num_warps/num_stages
        if not splats:
            self._defaults(kernel_name, given, call, call.args + [kw.value for kw in call.keywords])
            return
        # a **dict of literals: the keys it lacks are inserted into the dict; any other **
        # (a parameter, a dict built at run time) decides num_warps/num_stages where tune
        # cannot see
        written = scope.dicts.get(splats[0].id) if isinstance(splats[0], ast.Name) else None
        if len(splats) != 1 or written is None:
            return
        if isinstance(written, ast.Dict):
            self._defaults(kernel_name, given, written, written.values, quoted=self._quote(written))
        elif isinstance(written, ast.Call):
            self._defaults(kernel_name, given, written, [kw.value for kw in written.keywords])

    def _quote(self, node: ast.Dict) -> str:
        """The quote the dict's first string key is written with (a double quote by default)."""
        first = node.keys[0] if node.keys else None
        text = "" if first is None else ast.get_source_segment(self.source, first) or ""
        return text[:1] if text[:1] in ("'", '"') else '"'

    def _defaults(
        self,
        kernel: str,
        given: set[str],
        into: ast.expr,
        items: list[ast.expr],
        quoted: str = "",
        origin: KnobOrigin = KnobOrigin.LAUNCH,
    ) -> None:
        """num_warps / num_stages the launch (a `**` dict, a triton.Config) leaves out: knobs at
        Triton's defaults, rewritten by inserting the keyword (`"num_stages": 2` into a dict
        when `quoted` names its quote) after the last of `items`, or inside `into` when it has
        none (the separator then follows the keyword, so two insertions stay valid)."""
        at = self.off.end(max(items, key=self.off.end)) if items else self.off.end(into) - 1
        for param, default in (
            ("num_warps", DEFAULT_NUM_WARPS),
            ("num_stages", DEFAULT_NUM_STAGES),
        ):
            if param in given:
                continue
            label = f"{quoted}{param}{quoted}: " if quoted else f"{param}="
            site = Site(
                start=at,
                end=at,
                prefix=f", {label}" if items else label,
                suffix="" if items else ", ",
            )
            role = _role(param, self.kernels[kernel], param)
            self._add(param, default, role, origin, kernel, site, explicit=False)

    def _collect_heuristics(self) -> None:
        """`@triton.heuristics({"BLOCK": lambda args: 128})`: the lambda's literal is the knob;
        a computed body is one when launches observed its value."""
        for name, fn in self.jit_defs.items():
            info = self.kernels[name]
            for dec in fn.decorator_list:
                if not (isinstance(dec, ast.Call) and _dotted(dec).split(".")[-1] == "heuristics"):
                    continue
                values = dec.args[0] if dec.args else None
                values = next((kw.value for kw in dec.keywords if kw.arg == "values"), values)
                for key, body in dict_items(values) or []:
                    if not isinstance(body, ast.Lambda):
                        continue
                    found = self._resolve(body.body, self.module)
                    if found is None:
                        self._computed(name, key, body.body)
                        continue
                    const_name, value, sites, origin = found
                    knob = const_name or key
                    if origin == KnobOrigin.LAUNCH:
                        origin = KnobOrigin.HEURISTIC
                    self._add(knob, value, _role(knob, info, key), origin, name, sites, param=key)

    def _collect_autotune(self) -> None:
        for name, fn in self.jit_defs.items():
            for dec in fn.decorator_list:
                if not (isinstance(dec, ast.Call) and _dotted(dec).split(".")[-1] == "autotune"):
                    continue
                self.autotuned.add(name)
                configs_expr = next((kw.value for kw in dec.keywords if kw.arg == "configs"), None)
                if configs_expr is None and dec.args:
                    configs_expr = dec.args[0]
                if configs_expr is not None:
                    self._autotune_list(name, configs_expr)

    def _configs_of(self, expr: ast.expr) -> ast.expr:
        """The expression that builds an autotune list: through module names (`configs=CONFIGS`)
        and helpers with one return (`configs=get_configs()`)."""
        for _ in range(4):
            if isinstance(expr, ast.Name) and expr.id in self.module_exprs:
                expr = self.module_exprs[expr.id]
            elif (
                isinstance(expr, ast.Call)
                and isinstance(expr.func, ast.Name)
                and not expr.args
                and not expr.keywords
                and (found := returned(self.tree, expr.func.id)) is not None
            ):
                expr = found
            else:
                break
        return expr

    def _autotune_list(self, kernel: str, written: ast.expr) -> None:
        """A literal list: one config gives knobs, several an AutotuneChoice. A generated list
        (a comprehension tune can evaluate) is an AutotuneChoice whose pin writes the chosen
        config as a literal list in its place. Anything else is unreadable."""
        expr = self._configs_of(written)
        if isinstance(expr, ast.List):
            configs = [c for c in expr.elts if isinstance(c, ast.Call)]
            if len(configs) == len(expr.elts) and len(configs) == 1:
                self._single_config(kernel, configs[0])
                return
            values = [self._config_values(c) for c in configs]
            if configs and len(configs) == len(expr.elts) and all(v is not None for v in values):
                site = expr if self._in_module(expr) else written
                self._choice(kernel, values, site)  # type: ignore[arg-type]
                return
        generated = generated_configs(expr, self.module.consts)
        if generated is not None:
            defaults = {"num_warps": DEFAULT_NUM_WARPS, "num_stages": DEFAULT_NUM_STAGES}
            unique = list({config_signature(c): {**defaults, **c} for c in generated}.values())
            site = expr if self._in_module(expr) else written
            self._choice(kernel, unique, site)
            return
        text = ast.get_source_segment(self.source, written) or ast.unparse(written)
        self.unreadable.append(
            f"{kernel}: its autotune configs are built at run time ({_one_line(text)}); "
            "tune can neither pin nor rewrite them"
        )
        self.reported.add(kernel)

    def _in_module(self, expr: ast.expr) -> bool:
        """Whether `expr` is a module-level expression (not a helper's return value)."""
        return any(expr is v for v in self.module_exprs.values()) or any(
            expr is n for d in self.jit_defs.values() for n in ast.walk(d)
        )

    def _choice(self, kernel: str, configs: list[dict[str, int]], site: ast.expr) -> None:
        self.choices.append(
            AutotuneChoice(kernel=kernel, configs=configs, site=self._literal_site(site))
        )
        self.covered |= {(kernel, key) for c in configs for key in c}

    def _config_values(self, call: ast.Call) -> dict[str, int] | None:
        kwargs = (
            call.args[0]
            if call.args
            else next((kw.value for kw in call.keywords if kw.arg == "kwargs"), None)
        )
        if not isinstance(kwargs, ast.Dict):
            return None
        out: dict[str, int] = {}
        for k, v in zip(kwargs.keys, kwargs.values, strict=True):
            if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
                return None
            iv = _int_literal(v)
            if iv is None:
                return None
            out[k.value] = iv
        out["num_warps"] = DEFAULT_NUM_WARPS
        out["num_stages"] = DEFAULT_NUM_STAGES
        for kw in call.keywords:
            if kw.arg in _COMPILE_KWARGS:
                iv = _int_literal(kw.value)
                if iv is None:
                    return None
                out[kw.arg] = iv
        return out

    def _single_config(self, kernel: str, call: ast.Call) -> None:
        info = self.kernels[kernel]
        kwargs = call.args[0] if call.args else None
        if isinstance(kwargs, ast.Dict):
            for k, v in zip(kwargs.keys, kwargs.values, strict=True):
                if isinstance(k, ast.Constant) and isinstance(k.value, str):
                    found = self._resolve(v, self.module)
                    if found is not None:
                        const_name, value, sites, origin = found
                        self._add(
                            const_name or k.value,
                            value,
                            _role(k.value, info, k.value),
                            KnobOrigin.CONSTANT if const_name else KnobOrigin.AUTOTUNE,
                            kernel,
                            sites,
                            param=k.value,
                        )
        present = {kw.arg for kw in call.keywords if kw.arg is not None}
        for kw in call.keywords:
            if kw.arg in _COMPILE_KWARGS:
                found = self._resolve(kw.value, self.module)
                if found is not None:
                    const_name, value, sites, origin = found
                    self._add(
                        const_name or kw.arg,
                        value,
                        _role(kw.arg, info, kw.arg),
                        KnobOrigin.CONSTANT if const_name else KnobOrigin.AUTOTUNE,
                        kernel,
                        sites,
                        param=kw.arg,
                    )
        parts = call.args + [kw.value for kw in call.keywords]
        self._defaults(kernel, present, call, parts, origin=KnobOrigin.AUTOTUNE)


@functools.lru_cache(maxsize=512)
def find_knobs(source: str, observed: Observed = ()) -> KnobSpace:
    """Every knob of every kernel launched, autotuned or given heuristics in `source`, with the
    values launches observed at run time for what the source computes (cached: a pure function
    of its arguments; the result is frozen)."""
    return _Collector(source, observed).collect()


def knob_values(source: str) -> dict[str, int]:
    """The configuration a source states: knob name -> value ({} when it does not parse)."""
    try:
        return find_knobs(source).values()
    except KnobError:
        return {}


# ---- rewriting ------------------------------------------------------------------------------


def _edit(source: str, edits: list[tuple[Site, str]]) -> str:
    data = source.encode("utf-8")
    # Insertions at one point keep their order; replacements never overlap.
    ordered = sorted(enumerate(edits), key=lambda ie: (ie[1][0].start, ie[0]), reverse=True)
    for _, (site, text) in ordered:
        data = data[: site.start] + text.encode("utf-8") + data[site.end :]
    return data.decode("utf-8")


def apply_knobs(source: str, values: Mapping[str, int], observed: Observed = ()) -> str:
    """`source` with the named knobs set to `values` (only changed knobs are touched); `observed`
    gives the computed values launches showed (see find_knobs). The knobs of one computed
    value's keys share its site: the table is written from all of them."""
    space = find_knobs(source, observed)
    by_name = space.by_name()
    unknown = sorted(set(values) - set(by_name))
    if unknown:
        raise KnobError(f"the kernel has no knob {', '.join(unknown)}")
    edits: list[tuple[Site, str]] = []
    tables: dict[tuple[int, int], tuple[Site, dict[int, int]]] = {}
    changed: set[tuple[int, int]] = set()
    for knob in space.knobs:  # the source's order: insertions at one point come out the same
        value = values.get(knob.name, knob.value)
        if type(value) is not int:
            raise KnobError(f"knob {knob.name}: {value!r} is not an integer")
        for site in knob.sites:
            if site.key is None:
                if value != knob.value:
                    edits.append((site, site.render(value)))
                continue
            span = (site.start, site.end)
            tables.setdefault(span, (site, {}))[1][site.key] = value
            if value != knob.value:
                changed.add(span)
    edits += [
        (site, table_text(site.plain, entries))
        for span, (site, entries) in tables.items()
        if span in changed
    ]
    return _edit(source, edits)


def computed_values(source: str, observed: Observed) -> Observed:
    """`observed`, the launches of `source`, as the values its computations gave: a launch through
    a table `{1024: 2048}.get(E, E)` that showed 2048 had E == 1024 (the key every descendant's
    table is keyed by)."""
    inverse: dict[tuple[str, str | None], dict[int, int]] = {}
    for k in find_knobs(source).knobs:
        if k.key is not None and k.value != k.key:
            for kernel in (k.kernel, *k.also):
                inverse.setdefault((kernel, k.param), {})[k.value] = k.key
    return tuple(
        (kernel, tuple((p, inverse.get((kernel, p), {}).get(v, v)) for p, v in values))
        for kernel, values in observed
    )


def _config_text(values: Mapping[str, int]) -> str:
    consts = ", ".join(f"{k!r}: {v}" for k, v in values.items() if k not in _COMPILE_KWARGS)
    return (
        f"[triton.Config({{{consts}}}, num_warps={values['num_warps']}, "
        f"num_stages={values['num_stages']})]"
    )


def pin_autotune(source: str, kernel: str, index: int) -> str:
    """`source` with the autotune list of `kernel` replaced by its config `index` alone."""
    choice = next((c for c in find_knobs(source).autotune_choices if c.kernel == kernel), None)
    if choice is None or not 0 <= index < len(choice.configs):
        raise KnobError(f"kernel {kernel} has no autotune config {index}")
    return _edit(source, [(choice.site, _config_text(choice.configs[index]))])


def config_signature(values: Mapping[str, Any]) -> str:
    """The canonical text of a configuration: "BLOCK=64,num_warps=4" (names sorted)."""
    return ",".join(f"{k}={values[k]}" for k in sorted(values))


def parse_signature(signature: str) -> dict[str, int] | None:
    """The configuration a signature names, or None when it is not one (another provider's)."""
    out: dict[str, int] = {}
    for part in signature.split(","):
        name, sep, value = part.strip().partition("=")
        if not sep or not name or not re.fullmatch(r"-?\d+", value.strip()):
            return None
        out[name.strip()] = int(value)
    return out or None
