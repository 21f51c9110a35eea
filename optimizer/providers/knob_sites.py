"""Where a value that reaches a kernel launch is written in the source (AST only, no execution).

A launch argument `BLOCK=B` names a value; these functions find the literal that gives `B` its
value, whichever way the source spells it:
- a plain assignment `B = 64`, a tuple assignment `BM, BN = 64, 32`, an annotated one;
- a call of a helper whose only return is literals: `B, nw = settings()` with
  `def settings(): return 1024, 4`;
- a default argument of the function that launches: `def add(x, y, B=1024)`;
- a dict splatted into the launch: `cfg = {"B": 64}` / `cfg = dict(B=64)` ... `k[grid](**cfg)`;
- the literal a caller passes to the function that launches: `_launch(x, B=512)`;
- a table a previous rewrite left: `{8: 16, 4: 32}.get(nw, nw)` (16 where nw is 8, 32 where 4).
A name assigned more than once in one scope, or to anything else, has no literal site: its
value is computed, and only a launch observed at run time can say what it is.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field


def int_literal(node: ast.AST | None) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Call):
        return dotted(node.func)
    return ""


def helper_returns(tree: ast.Module, skip: set[str]) -> dict[str, list[ast.expr]]:
    """Module-level functions (not in `skip`) whose one return statement returns int literals:
    name -> the literal nodes, in order."""
    out: dict[str, list[ast.expr]] = {}
    for stmt in tree.body:
        if not isinstance(stmt, ast.FunctionDef) or stmt.name in skip:
            continue
        returns = [n for n in ast.walk(stmt) if isinstance(n, ast.Return)]
        if len(returns) != 1 or returns[0].value is None:
            continue
        value = returns[0].value
        elts = list(value.elts) if isinstance(value, ast.Tuple) else [value]
        if all(int_literal(e) is not None for e in elts):
            out[stmt.name] = elts
    return out


def _pairs(
    target: ast.expr, value: ast.expr | None, helpers: dict[str, list[ast.expr]]
) -> list[tuple[str, ast.expr | None]]:
    """(name, the int literal it gets or None) for every name `target` binds."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
        elts = helpers.get(value.func.id)
        if elts is not None:
            value = elts[0] if len(elts) == 1 else ast.Tuple(elts=elts, ctx=ast.Load())
    if isinstance(target, ast.Name):
        return [(target.id, value if int_literal(value) is not None else None)]
    if (
        isinstance(target, ast.Tuple | ast.List)
        and isinstance(value, ast.Tuple | ast.List)
        and len(target.elts) == len(value.elts)
    ):
        return [p for t, v in zip(target.elts, value.elts, strict=True) for p in _pairs(t, v, {})]
    return [(n.id, None) for n in ast.walk(target) if isinstance(n, ast.Name)]


@dataclass
class Scope:
    """The literals names have in one scope (module or function), and the names it binds."""

    consts: dict[str, ast.expr] = field(default_factory=dict)  # name -> its int literal node
    dicts: dict[str, ast.expr] = field(default_factory=dict)  # cfg -> its dict of literals
    bound: set[str] = field(default_factory=set)  # every name the scope assigns or takes

    def inner(self, fn: ast.FunctionDef | ast.AsyncFunctionDef, helpers: dict) -> Scope:
        """The scope of `fn` nested in this one: its own names shadow the outer ones."""
        own = scan(fn.body, helpers)
        args = fn.args
        params = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
        defaults = positional_defaults(fn)
        defaults.update(
            {a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d}
        )
        consts = {k: v for k, v in self.consts.items() if k not in own.bound and k not in params}
        consts.update(
            {p: d for p, d in defaults.items() if int_literal(d) is not None and p not in own.bound}
        )
        consts.update(own.consts)
        dicts = {k: v for k, v in self.dicts.items() if k not in own.bound and k not in params}
        dicts.update(own.dicts)
        return Scope(consts, dicts, own.bound | set(params))


def scan(body: list[ast.stmt], helpers: dict[str, list[ast.expr]]) -> Scope:
    """The names `body` (not nested blocks' functions) assigns exactly once to an int literal,
    the dicts of literals it assigns once, and every name it binds."""
    counts: dict[str, int] = {}
    literal: dict[str, ast.expr] = {}
    dicts: dict[str, ast.expr] = {}
    for stmt in body:
        pairs: list[tuple[str, ast.expr | None]] = []
        if isinstance(stmt, ast.Assign):
            for t in stmt.targets:
                pairs += _pairs(t, stmt.value, helpers)
                if isinstance(t, ast.Name) and dict_items(stmt.value) is not None:
                    dicts[t.id] = stmt.value
        elif isinstance(stmt, ast.AnnAssign):
            pairs += _pairs(stmt.target, stmt.value, helpers)
        elif isinstance(stmt, ast.AugAssign):
            pairs += [(n.id, None) for n in ast.walk(stmt.target) if isinstance(n, ast.Name)]
        elif isinstance(stmt, ast.For | ast.With | ast.If | ast.While | ast.Try):
            stores = [n for n in ast.walk(stmt) if isinstance(n, ast.Name)]
            pairs += [(n.id, None) for n in stores if isinstance(n.ctx, ast.Store)]
        for name, value in pairs:
            counts[name] = counts.get(name, 0) + 1
            if value is not None:
                literal[name] = value
    once = {k for k, c in counts.items() if c == 1}
    return Scope(
        {k: v for k, v in literal.items() if k in once},
        {k: v for k, v in dicts.items() if k in once},
        set(counts),
    )


def dict_items(value: ast.expr | None) -> list[tuple[str, ast.expr]] | None:
    """The (key, value) items of `{"K": v}` or `dict(K=v)`, or None for anything else."""
    if isinstance(value, ast.Dict):
        keys = [k.value if isinstance(k, ast.Constant) else None for k in value.keys]
        if all(isinstance(k, str) for k in keys):
            return list(zip(keys, value.values, strict=True))  # type: ignore[arg-type]
        return None
    if (
        isinstance(value, ast.Call)
        and dotted(value.func) == "dict"
        and not value.args
        and all(kw.arg is not None for kw in value.keywords)
    ):
        return [(kw.arg, kw.value) for kw in value.keywords]  # type: ignore[misc]
    return None


def positional_defaults(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, ast.expr]:
    """Positional parameter -> its default expression."""
    args = fn.args.posonlyargs + fn.args.args
    n = len(fn.args.defaults)
    return {a.arg: d for a, d in zip(args[len(args) - n :], fn.args.defaults, strict=True)}


def caller_literals(
    tree: ast.Module, fn: ast.FunctionDef | ast.AsyncFunctionDef, param: str
) -> list[ast.expr] | None:
    """The int literals every call of `fn` in the module passes as `param` (its default where a
    call leaves it out), or None when some call passes anything else or there is no call."""
    args = fn.args.posonlyargs + fn.args.args
    index = next((i for i, a in enumerate(args) if a.arg == param), None)
    defaults = positional_defaults(fn)
    found: list[ast.expr] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and dotted(node.func).split(".")[-1] == fn.name):
            continue
        if isinstance(node.func, ast.Subscript):
            continue
        given = next((kw.value for kw in node.keywords if kw.arg == param), None)
        if given is None and index is not None and index < len(node.args):
            given = node.args[index]
        given = given if given is not None else defaults.get(param)
        if int_literal(given) is None:
            return None
        assert given is not None
        found.append(given)
    return found or None


def table(expr: ast.expr) -> tuple[list[tuple[int, int]], ast.expr] | None:
    """((key, value) entries, keyed expression) of `{K1: V1, K2: V2}.get(E, E)`, else None."""
    if not (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Attribute)
        and expr.func.attr == "get"
        and isinstance(expr.func.value, ast.Dict)
        and expr.func.value.keys
        and len(expr.args) == 2
    ):
        return None
    pairs = [
        (int_literal(k), int_literal(v))
        for k, v in zip(expr.func.value.keys, expr.func.value.values, strict=True)
    ]
    entries = [(k, v) for k, v in pairs if k is not None and v is not None]
    if len(entries) != len(pairs) or ast.dump(expr.args[0]) != ast.dump(expr.args[1]):
        return None
    return entries, expr.args[0]


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
Parents = dict[ast.AST, ast.AST]


def parents_of(tree: ast.Module) -> Parents:
    """Each node's parent: where a launch sits, which function binds a name it reads."""
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def binds(fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda, name: str) -> bool:
    """Whether `fn` makes `name` its own: a parameter, or a name its body (not a nested
    function's) stores or defines."""
    args = fn.args
    params = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
    params += [a.arg for a in (args.vararg, args.kwarg) if a is not None]
    if name in params:
        return True
    return not isinstance(fn, ast.Lambda) and _stores(fn.body, name) > 0


def binder(node: ast.AST, name: str, parents: Parents) -> ast.AST:
    """The innermost function around `node` that binds `name`, or the module: the scope whose
    every read of `name` sees the value `node` reads."""
    at = parents.get(node)
    while at is not None and not isinstance(at, ast.Module):
        if isinstance(at, _SCOPES) and binds(at, name):
            return at
        at = parents.get(at)
    assert at is not None, "a node of the tree has the module above it"
    return at


def _body(scope: ast.AST) -> list:
    """The statements of a function or module; a lambda's one expression."""
    if isinstance(scope, ast.Lambda):
        return [scope.body]
    assert isinstance(scope, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef)
    return list(scope.body)


def reads(scope: ast.AST, name: str, skip: set[str]) -> list[ast.Name]:
    """Every load of `name` in `scope` (a function or the module): nested functions and
    lambdas that do not bind it themselves included (a grid lambda reads the launching
    function's block), @jit functions (`skip`) and f-strings (a table there would read as an
    escaped brace) left out."""
    out: list[ast.Name] = []
    stack: list[ast.AST] = list(_body(scope))
    while stack:
        node = stack.pop()
        if isinstance(node, _SCOPES) and (binds(node, name) or getattr(node, "name", "") in skip):
            continue
        if isinstance(node, ast.JoinedStr):
            continue
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load):
            out.append(node)
        stack += list(ast.iter_child_nodes(node))
    return out


def definition(name: ast.Name, parents: Parents) -> ast.expr | None:
    """The value a name read is given, when the scope that binds it binds it once, by a plain
    `name = value` or a `def name(...)` with one return (its returned value; a grid function
    of meta). Else None: a parameter, a tuple, a loop variable."""
    scope = binder(name, name.id, parents)
    body = [] if isinstance(scope, ast.Lambda) else _body(scope)
    found: list[ast.expr | None] = []
    for stmt in body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == name.id:
            returns = [n for n in ast.walk(stmt) if isinstance(n, ast.Return)]
            found.append(returns[0].value if len(returns) == 1 else None)
        elif (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and stmt.targets[0].id == name.id
        ):
            found.append(stmt.value)
    return found[0] if len(found) == 1 and _stores(body, name.id) == 1 else None


def _stores(body: list[ast.stmt], name: str) -> int:
    """How many times `body` (not its nested functions) stores or defines `name`."""
    stores = 0
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store):
            stores += 1
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            stores += node.name == name
        if not isinstance(node, _SCOPES):
            stack += list(ast.iter_child_nodes(node))
    return stores


def grid_parts(launch: ast.Call, parents: Parents, depth: int = 4) -> list[ast.expr]:
    """The expressions a launch's grid `kernel[grid](...)` is computed from: the grid itself
    (a lambda's body), and through names it reads, the values those names are assigned in
    their scope (`grid = (nb,)` with `nb = triton.cdiv(n, BLOCK)`), `depth` names deep."""
    assert isinstance(launch.func, ast.Subscript)
    parts: list[ast.expr] = []
    todo: list[tuple[ast.expr, int]] = [(launch.func.slice, 0)]
    seen: set[int] = set()
    while todo:
        expr, level = todo.pop()
        if id(expr) in seen:
            continue
        seen.add(id(expr))
        expr = expr.body if isinstance(expr, ast.Lambda) else expr
        parts.append(expr)
        if level >= depth:
            continue
        for node in ast.walk(expr):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                value = definition(node, parents)
                if value is not None:
                    todo.append((value, level + 1))
    return parts


def divisors(expr: ast.expr) -> list[ast.expr]:
    """What `expr` divides by: the second argument of a `cdiv`, the right side of `//` or `/`
    (a grid that divides the problem by a block has one program per block)."""
    out: list[ast.expr] = []
    for node in ast.walk(expr):
        if isinstance(node, ast.Call) and dotted(node.func).split(".")[-1] == "cdiv":
            out += node.args[1:2]
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv | ast.Div):
            out.append(node.right)
    return out


def names_read(expr: ast.expr) -> set[str]:
    """The names and string keys `expr` reads (`BLOCK`, `meta["BLOCK"]` gives meta and BLOCK),
    not the functions it calls (`triton` of `triton.next_power_of_2(n)`)."""
    called = {dotted(n.func).split(".")[0] for n in ast.walk(expr) if isinstance(n, ast.Call)}
    out = {n.id for n in ast.walk(expr) if isinstance(n, ast.Name)} - called
    out |= {
        n.slice.value
        for n in ast.walk(expr)
        if isinstance(n, ast.Subscript)
        and isinstance(n.slice, ast.Constant)
        and isinstance(n.slice.value, str)
    }
    return out


def returned(tree: ast.Module, name: str) -> ast.expr | None:
    """The expression the module-level function `name` returns, when it has one return."""
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == name:
            returns = [n for n in ast.walk(stmt) if isinstance(n, ast.Return)]
            if len(returns) == 1:
                return returns[0].value
    return None


# What a generated autotune list may be built of: a comprehension over literal lists, tuples and
# range() of `triton.Config({"KEY": expr}, num_warps=expr, num_stages=expr)`, with arithmetic
# and comparisons of integers (no **: the values stay small), nothing else.
_GENERATED_NODES = (
    ast.ListComp,
    ast.comprehension,
    ast.Name,
    ast.Load,
    ast.Store,
    ast.Constant,
    ast.List,
    ast.Tuple,
    ast.Dict,
    ast.Call,
    ast.keyword,
    ast.Attribute,
    ast.Compare,
    ast.BoolOp,
    ast.BinOp,
    ast.UnaryOp,
    ast.IfExp,
    ast.cmpop,
    ast.boolop,
    ast.unaryop,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.FloorDiv,
    ast.Mod,
)
_MAX_GENERATED = 256


def generated_configs(expr: ast.expr, consts: dict[str, ast.expr]) -> list[dict[str, int]] | None:
    """The configs a comprehension of triton.Config gives (each: its integer kwargs plus
    num_warps/num_stages where it states them), evaluated without running any of the kernel's
    code; None when the expression is built of anything else or gives over 256 configs."""
    if not isinstance(expr, ast.ListComp) or len(expr.generators) > 3:
        return None
    for node in ast.walk(expr):
        if not isinstance(node, _GENERATED_NODES):
            return None
        if isinstance(node, ast.Attribute) and dotted(node) != "triton.Config":
            return None
        if isinstance(node, ast.Call) and dotted(node.func) not in ("range", "triton.Config"):
            return None
        if isinstance(node, ast.Constant) and type(node.value) not in (int, str, bool):
            return None

    made: list[int] = []

    def config(kwargs: dict | None = None, **compile_kwargs: int) -> dict[str, int]:
        made.append(1)
        if len(made) > _MAX_GENERATED:
            raise ValueError("too many configs")
        return {**(kwargs or {}), **compile_kwargs}

    def bounded_range(*args: int) -> range:
        out = range(*args)
        if len(out) > 64:
            raise ValueError("range too long")
        return out

    names = {k: v.value for k, v in consts.items() if isinstance(v, ast.Constant)}
    namespace: dict[str, object] = {
        "__builtins__": {},
        "range": bounded_range,
        "triton": type("triton", (), {"Config": staticmethod(config)}),
        **names,
    }
    try:
        code = compile(ast.Expression(body=expr), "<autotune configs>", "eval")
        values = eval(code, namespace)  # noqa: S307 - the AST is checked above: literals only
    except Exception:  # a name it does not know, a type error: not a list tune can read
        return None
    if not values or len(values) > _MAX_GENERATED:
        return None
    if not all(
        isinstance(c, dict) and all(isinstance(k, str) and type(v) is int for k, v in c.items())
        for c in values
    ):
        return None
    return values
