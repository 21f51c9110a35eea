"""Static checks of a candidate's source (AST), one clear reason per finding.

A kernel candidate computes; it has no business starting threads or side streams, replacing the
functions that time or compare it, introspecting frames, doing file or network I/O, reading the
bundle, or caching outputs by tensor address. Each rule looks for the construct itself, not for
words, so a legitimate Triton kernel (loads, stores, `torch.empty_like`, `triton.cdiv`,
`triton.Config`, `os.environ.get`, shape checks, `x.data_ptr() % 16`) passes.

Guards (the `guard` field of the IntegrityFlagged event):
    static:thread          threading / multiprocessing / concurrent / asyncio / subprocess / fork
    static:side-stream     torch.cuda.Stream, torch.cuda.stream(...), set_stream
    static:timer-patch     assigning to (or setattr on) a timing function: time.*, do_bench, Event
    static:patching        assigning to any attribute of an imported module (torch.allclose = ...)
    static:profiler        cProfile / profile / torch.profiler / triton.profiler / sys.setprofile
    static:introspection   gc, inspect, ctypes, sys._getframe, frame/code/globals attributes,
                           tlxdb's own packages (the evaluator runs in the same process)
    static:file-io         open(), os file functions, shutil, tempfile, pickle, Path.read_text ...
    static:network         socket, urllib, http, requests, ...
    static:dynamic-code    eval / exec / compile / __import__ / importlib (hides code from checks)
    static:bundle-read     importing or naming harness.py, cases.json, target.json, reference_kernel
    static:input-mutation  a Python function mutating one of its tensor arguments in place
    static:output-cache    results keyed by data_ptr() / id() (returns stale outputs for new inputs)
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from optimizer import pysource


@dataclass(frozen=True)
class Finding:
    guard: str
    detail: str
    line: int


_IMPORT_RULES: dict[str, tuple[str, str]] = {
    "threading": ("static:thread", "imports threading: work on another thread escapes the timer"),
    "_thread": ("static:thread", "imports _thread: work on another thread escapes the timer"),
    "multiprocessing": (
        "static:thread",
        "imports multiprocessing: work in another process escapes the timer",
    ),
    "concurrent": (
        "static:thread",
        "imports concurrent.futures: work on another thread escapes the timer",
    ),
    "asyncio": ("static:thread", "imports asyncio: background work escapes the timer"),
    "subprocess": ("static:thread", "imports subprocess: spawns processes"),
    "signal": ("static:thread", "imports signal: installs asynchronous handlers"),
    "socket": ("static:network", "imports socket: network I/O"),
    "urllib": ("static:network", "imports urllib: network I/O"),
    "http": ("static:network", "imports http: network I/O"),
    "requests": ("static:network", "imports requests: network I/O"),
    "httpx": ("static:network", "imports httpx: network I/O"),
    "ftplib": ("static:network", "imports ftplib: network I/O"),
    "gc": ("static:introspection", "imports gc: can reach the harness's objects"),
    "inspect": ("static:introspection", "imports inspect: can reach the caller's frames"),
    "ctypes": ("static:introspection", "imports ctypes: raw memory access"),
    "cProfile": ("static:profiler", "imports cProfile: profiler hooks"),
    "profile": ("static:profiler", "imports profile: profiler hooks"),
    "shutil": ("static:file-io", "imports shutil: file I/O"),
    "tempfile": ("static:file-io", "imports tempfile: file I/O"),
    "pickle": ("static:file-io", "imports pickle: file I/O"),
    "shelve": ("static:file-io", "imports shelve: file I/O"),
    "glob": ("static:file-io", "imports glob: reads the file system"),
    "importlib": ("static:dynamic-code", "imports importlib: loads code the checks cannot see"),
    "harness": ("static:bundle-read", "imports the harness"),
    "reference_kernel": ("static:bundle-read", "imports the reference kernel"),
}
_TLXDB_PACKAGES = ("optimizer", "tlxstore", "queries", "profilers", "importers", "cli")
_IMPORT_DOTTED_RULES: dict[str, tuple[str, str]] = {
    "unittest.mock": ("static:patching", "imports unittest.mock: patches functions"),
    "torch.profiler": ("static:profiler", "imports torch.profiler: profiler hooks"),
    "triton.profiler": ("static:profiler", "imports triton.profiler: profiler hooks"),
    "torch.multiprocessing": (
        "static:thread",
        "imports torch.multiprocessing: work in another process",
    ),
}
_BUILTIN_CALLS: dict[str, tuple[str, str]] = {
    "open": ("static:file-io", "calls open(): file I/O"),
    "eval": ("static:dynamic-code", "calls eval(): runs code the checks cannot see"),
    "exec": ("static:dynamic-code", "calls exec(): runs code the checks cannot see"),
    "compile": ("static:dynamic-code", "calls compile(): builds code the checks cannot see"),
    "__import__": (
        "static:dynamic-code",
        "calls __import__(): loads modules the checks cannot see",
    ),
    "globals": ("static:introspection", "calls globals(): reaches module state"),
    "vars": ("static:introspection", "calls vars(): reaches module state"),
    "breakpoint": ("static:introspection", "calls breakpoint()"),
}
_OS_IO = {
    "open",
    "write",
    "read",
    "remove",
    "unlink",
    "rename",
    "replace",
    "rmdir",
    "removedirs",
    "mkdir",
    "makedirs",
    "listdir",
    "scandir",
    "walk",
    "chmod",
    "chown",
    "truncate",
    "link",
    "symlink",
    "utime",
    "dup",
    "dup2",
    "pipe",
    "fdopen",
    "sendfile",
}
_OS_PROCESS = {
    "system",
    "popen",
    "fork",
    "forkpty",
    "kill",
    "killpg",
    "execv",
    "execve",
    "execl",
    "execlp",
    "execvp",
    "execvpe",
    "spawnl",
    "spawnv",
    "spawnve",
    "posix_spawn",
    "posix_spawnp",
    "_exit",
}
_PATH_IO_METHODS = {
    "read_text",
    "write_text",
    "read_bytes",
    "write_bytes",
    "unlink",
    "touch",
    "rmdir",
    "chmod",
    "symlink_to",
    "hardlink_to",
}
_TENSOR_FILE_IO = {"save", "load", "fromfile", "tofile", "savez", "loadtxt", "savetxt", "memmap"}
_INTROSPECTION_ATTRS = {
    "__code__",
    "__globals__",
    "__closure__",
    "__builtins__",
    "__subclasses__",
    "__dict__",
    "f_back",
    "f_globals",
    "f_locals",
    "f_code",
    "gi_frame",
    "tb_frame",
    "func_globals",
}
_SYS_INTROSPECTION = {
    "_getframe",
    "settrace",
    "setprofile",
    "modules",
    "_current_frames",
    "addaudithook",
}
_TIMER_NAMES = {
    "perf_counter",
    "perf_counter_ns",
    "time",
    "time_ns",
    "monotonic",
    "monotonic_ns",
    "process_time",
    "do_bench",
    "do_bench_cudagraph",
    "synchronize",
    "elapsed_time",
    "Event",
    "record",
    "sleep",
}
_STREAM_CALLS = {"Stream", "stream", "set_stream", "ExternalStream"}
_BUNDLE_NAMES = ("harness.py", "cases.json", "target.json", "budget.json", "reference_kernel")
_OUTPUT_PARAM_NAMES = {"out", "output", "dst", "result", "res", "o"}
_JIT_DECORATORS = {"jit", "autotune", "heuristics", "kernel", "must_use_result"}


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _is_jit(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for dec in fn.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        name = _dotted(target) or ""
        if name.rsplit(".", 1)[-1] in _JIT_DECORATORS:
            return True
    return False


def _contains_address(node: ast.AST, tainted: set[str]) -> bool:
    """Whether an expression involves a tensor address: x.data_ptr(), id(x), or a name that
    was assigned from one."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            f = sub.func
            if isinstance(f, ast.Attribute) and f.attr in (
                "data_ptr",
                "untyped_storage",
                "storage",
            ):
                return True
            if isinstance(f, ast.Name) and f.id == "id":
                return True
        if isinstance(sub, ast.Name) and sub.id in tainted:
            return True
    return False


class _Checker(ast.NodeVisitor):
    def __init__(self) -> None:
        self.findings: list[Finding] = []
        self._seen: set[tuple[str, str]] = set()
        self.modules: dict[str, str] = {}  # local alias -> imported module (dotted)
        self.params: list[set[str]] = []  # parameters of enclosing non-jit Python functions
        self.tainted: set[str] = set()  # names assigned from a tensor address

    def add(self, guard: str, detail: str, node: ast.AST) -> None:
        if (guard, detail) in self._seen:
            return
        self._seen.add((guard, detail))
        self.findings.append(Finding(guard, detail, getattr(node, "lineno", 0)))

    # ---- imports -----------------------------------------------------------------------
    def _check_module(self, module: str, node: ast.AST) -> None:
        for dotted, rule in _IMPORT_DOTTED_RULES.items():
            if module == dotted or module.startswith(dotted + "."):
                self.add(rule[0], rule[1], node)
                return
        top = module.split(".")[0]
        if top in _TLXDB_PACKAGES:
            self.add(
                "static:introspection", f"imports tlxdb's own {top}: reaches the evaluator", node
            )
            return
        if top in _IMPORT_RULES:
            self.add(*_IMPORT_RULES[top], node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._check_module(alias.name, node)
            if alias.asname:
                self.modules[alias.asname] = alias.name
            else:
                self.modules[alias.name.split(".")[0]] = alias.name.split(".")[0]
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level:  # relative imports reach into the harness's folder
            self.add(
                "static:bundle-read", "uses a relative import (reaches the bundle's folder)", node
            )
        self._check_module(module, node)
        for alias in node.names:
            full = f"{module}.{alias.name}" if module else alias.name
            self._check_module(full, node)
            if module in (
                "time",
                "torch",
                "triton",
                "numpy",
                "math",
                "builtins",
                "sys",
                "os",
                "random",
                "triton.testing",
                "torch.testing",
            ):
                self.modules[alias.asname or alias.name] = full
        self.generic_visit(node)

    # ---- functions ---------------------------------------------------------------------
    def _visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if _is_jit(node):
            self.params.append(set())
        else:
            a = node.args
            names = {p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]} - {"self", "cls"}
            self.params.append(
                {
                    n
                    for n in names
                    if n not in _OUTPUT_PARAM_NAMES and not n.startswith(("out", "dst"))
                }
            )
        self.generic_visit(node)
        self.params.pop()

    visit_FunctionDef = _visit_function
    visit_AsyncFunctionDef = _visit_function

    def _param(self, node: ast.AST) -> str | None:
        if self.params and isinstance(node, ast.Name) and node.id in self.params[-1]:
            return node.id
        return None

    # ---- assignments -------------------------------------------------------------------
    def _module_attr(self, target: ast.AST) -> str | None:
        """'torch.allclose' when target is an attribute chain rooted at an imported module."""
        if not isinstance(target, ast.Attribute):
            return None
        dotted = _dotted(target)
        if dotted is None:
            return None
        root, _, rest = dotted.partition(".")
        if root in self.modules:
            return f"{self.modules[root]}.{rest}"
        return None

    def _check_target(self, target: ast.AST, node: ast.AST) -> None:
        if isinstance(target, ast.Tuple | ast.List):
            for t in target.elts:
                self._check_target(t, node)
            return
        dotted = self._module_attr(target)
        if dotted is not None:
            self._patch_finding(dotted, node)
        if isinstance(target, ast.Subscript):
            p = self._param(target.value)
            if p is not None:
                self.add("static:input-mutation", f"writes into its argument {p!r} in place", node)
            base = _dotted(target.value) or ""
            if base == "sys.modules" or base.endswith("__dict__"):
                self.add("static:patching", f"assigns into {base}", node)
            elif _contains_address(target.slice, self.tainted):
                self.add(
                    "static:output-cache",
                    "stores results keyed by a tensor address (data_ptr/id): stale outputs for new inputs",
                    node,
                )

    def _patch_finding(self, dotted: str, node: ast.AST) -> None:
        leaf = dotted.rsplit(".", 1)[-1]
        if leaf in _TIMER_NAMES or dotted.startswith("time."):
            self.add(
                "static:timer-patch", f"replaces {dotted}: the measurement would be fooled", node
            )
        else:
            self.add(
                "static:patching",
                f"replaces {dotted}: changes a function or setting the harness relies on",
                node,
            )

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self._check_target(t, node)
        if _contains_address(node.value, self.tainted):
            for t in node.targets:
                for sub in ast.walk(t):
                    if isinstance(sub, ast.Name):
                        self.tainted.add(sub.id)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_target(node.target, node)
        p = self._param(node.target)
        if p is not None:
            self.add(
                "static:input-mutation",
                f"updates its argument {p!r} in place ({type(node.op).__name__})",
                node,
            )
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_target(node.target, node)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for t in node.targets:
            dotted = self._module_attr(t)
            if dotted is not None:
                self._patch_finding(dotted, node)
        self.generic_visit(node)

    # ---- expressions -------------------------------------------------------------------
    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in _INTROSPECTION_ATTRS:
            self.add("static:introspection", f"accesses .{node.attr}", node)
        dotted = _dotted(node)
        if dotted is not None:
            root, _, rest = dotted.partition(".")
            resolved = (
                f"{self.modules.get(root, root)}.{rest}" if rest else self.modules.get(root, root)
            )
            if resolved.startswith("sys.") and resolved.split(".")[1] in _SYS_INTROSPECTION:
                self.add("static:introspection", f"uses {resolved}", node)
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str):
            for name in _BUNDLE_NAMES:
                if name in node.value:
                    self.add("static:bundle-read", f"names the bundle file {name!r}", node)
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        if any(isinstance(op, ast.In | ast.NotIn) for op in node.ops) and _contains_address(
            node.left, self.tainted
        ):
            self.add(
                "static:output-cache",
                "looks up results by a tensor address (data_ptr/id): stale outputs for new inputs",
                node,
            )
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        f = node.func
        if isinstance(f, ast.Name) and f.id in _BUILTIN_CALLS and f.id not in self.modules:
            self.add(*_BUILTIN_CALLS[f.id], node)
        if isinstance(f, ast.Name) and f.id in ("setattr", "delattr") and node.args:
            dotted = _dotted(node.args[0])
            if dotted is not None and dotted.split(".")[0] in self.modules:
                root, _, rest = dotted.partition(".")
                arg = node.args[1] if len(node.args) > 1 else None
                name = str(arg.value) if isinstance(arg, ast.Constant) else "?"
                base = f"{self.modules[root]}.{rest}" if rest else self.modules[root]
                self._patch_finding(f"{base}.{name}", node)
        dotted = _dotted(f)
        if dotted is not None:
            root, _, rest = dotted.partition(".")
            resolved = (
                f"{self.modules[root]}.{rest}"
                if root in self.modules and rest
                else self.modules.get(root, dotted)
            )
            head, _, leaf = resolved.rpartition(".")
            if head == "os" and leaf in _OS_IO:
                self.add("static:file-io", f"calls os.{leaf}(): file I/O", node)
            elif head == "os" and leaf in _OS_PROCESS:
                self.add("static:thread", f"calls os.{leaf}(): process control", node)
            elif head in ("torch", "numpy") and leaf in _TENSOR_FILE_IO:
                self.add("static:file-io", f"calls {resolved}(): file I/O", node)
            elif leaf in _STREAM_CALLS and (head.startswith("torch") or head.endswith("cuda")):
                self.add(
                    "static:side-stream",
                    f"uses {resolved}: work on a side stream escapes the timer",
                    node,
                )
        if isinstance(f, ast.Attribute):
            if f.attr in _PATH_IO_METHODS and not (_dotted(f.value) or "").startswith(
                ("tl", "triton", "torch")
            ):
                self.add("static:file-io", f"calls .{f.attr}(): file I/O", node)
            if (
                f.attr in ("get", "setdefault", "pop")
                and node.args
                and _contains_address(node.args[0], self.tainted)
            ):
                self.add(
                    "static:output-cache",
                    "looks up results by a tensor address (data_ptr/id): stale outputs for new inputs",
                    node,
                )
            p = self._param(f.value)
            if (
                p is not None
                and f.attr.endswith("_")
                and not f.attr.startswith("_")
                and f.attr != "requires_grad_"
            ):
                self.add(
                    "static:input-mutation",
                    f"mutates its argument {p!r} in place (.{f.attr}())",
                    node,
                )
        for kw in node.keywords:
            out_arg = self._param(kw.value) if kw.arg == "out" else None
            if out_arg is not None:
                self.add(
                    "static:input-mutation",
                    f"writes a result into its argument {out_arg!r} (out=)",
                    node,
                )
        self.generic_visit(node)


# ---- whole-module rules -----------------------------------------------------------------------

_ALLOC_CALLS = {
    "empty",
    "empty_like",
    "zeros",
    "zeros_like",
    "ones",
    "ones_like",
    "full",
    "full_like",
    "empty_strided",
    "new_empty",
    "new_zeros",
    "new_ones",
    "new_full",
    "clone",
}
_VIEW_METHODS = {
    "view",
    "reshape",
    "flatten",
    "view_as",
    "as_strided",
    "transpose",
    "permute",
    "squeeze",
    "unsqueeze",
    "expand",
    "narrow",
    "select",
    "contiguous",
    "detach",
    "t",
    "unflatten",
}


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _jit_kernels(tree: ast.Module) -> dict[str, tuple[list[str], set[str]]]:
    """Triton kernels of the module: name -> (parameters, parameters it writes through)."""
    out = {}
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef) or not _is_jit(fn):
            continue
        params = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]]
        derived: dict[str, set[str]] = {p: {p} for p in params}
        written: set[str] = set()

        def roots(expr: ast.AST, derived: dict[str, set[str]] = derived) -> set[str]:
            found: set[str] = set()
            for n in _names(expr):
                found |= derived.get(n, set())
            return found

        for node in ast.walk(fn):
            if isinstance(node, ast.Assign):
                r = roots(node.value)
                for t in node.targets:
                    for n in _names(t):
                        derived[n] = derived.get(n, set()) | r
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                attr = node.func.attr
                if attr == "store" or attr.startswith("atomic_"):
                    base = _dotted(node.func.value) or ""
                    if base in ("tl", "triton.language") or base.endswith(".language"):
                        ptr = (
                            node.args[0]
                            if node.args
                            else next(
                                (k.value for k in node.keywords if k.arg in ("pointer", "ptr")),
                                None,
                            )
                        )
                        if ptr is not None:
                            written |= roots(ptr)
                    else:  # a descriptor or block pointer object: desc.store(offsets, value)
                        written |= roots(node.func.value)
        out[fn.name] = (params, written & set(params))
    return out


def _module_names(tree: ast.Module) -> set[str]:
    names = set()
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                names |= _names(t)
    return names


def _is_alloc(value: ast.AST) -> bool:
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute | ast.Name)
        and (value.func.attr if isinstance(value.func, ast.Attribute) else value.func.id)
        in _ALLOC_CALLS
    )


def _function_rules(
    tree: ast.Module, kernels: dict[str, tuple[list[str], set[str]]]
) -> list[Finding]:
    """The input-mutation and output-cache findings of every Python (not @jit) function."""
    findings: list[Finding] = []
    module_names = _module_names(tree)
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) and not _is_jit(fn):
            findings += _FunctionScan(fn, module_names, kernels).findings()
    return findings


class _FunctionScan:
    """One Python function: the locals that view its inputs, the locals holding tensors it
    allocated, and the module-level containers that receive them."""

    def __init__(
        self,
        fn: ast.FunctionDef | ast.AsyncFunctionDef,
        module_names: set[str],
        kernels: dict[str, tuple[list[str], set[str]]],
    ) -> None:
        self.fn = fn
        self.kernels = kernels
        a = fn.args
        params = {p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]} - {"self", "cls"}
        inputs = {
            n for n in params if n not in _OUTPUT_PARAM_NAMES and not n.startswith(("out", "dst"))
        }
        self.alias: dict[str, str] = {p: p for p in inputs}  # local name -> the input it views
        self.allocs: set[str] = set()
        self.globals_declared = {
            n for node in ast.walk(fn) if isinstance(node, ast.Global) for n in node.names
        }
        local_names = {
            n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        } - self.globals_declared
        self.containers = (module_names | self.globals_declared) - local_names - params
        self.cached_in: set[str] = (
            set()
        )  # module-level containers that received an allocated tensor
        self.cached_names: set[str] = set()
        self.found: list[Finding] = []

    def findings(self) -> list[Finding]:
        for node in ast.walk(self.fn):
            if isinstance(node, ast.Assign):
                self._assign(node)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                self._container_call(node, node.func)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript):
                self._launch(node, node.func)
        for node in ast.walk(self.fn):
            if (
                isinstance(node, ast.Return)
                and node.value is not None
                and self._returns_cached(node.value)
            ):
                where = ", ".join(sorted(self.cached_in))
                self.found.append(
                    Finding(
                        "static:output-cache",
                        f"{self.fn.name}() keeps its output tensor in module-level {where} and "
                        "returns it across calls: stale results for new inputs",
                        node.lineno,
                    )
                )
        return self.found

    def _is_allocated(self, v: ast.expr) -> bool:
        return (isinstance(v, ast.Name) and v.id in self.allocs) or _is_alloc(v)

    def _viewed_input(self, v: ast.expr) -> str | None:
        """The input that `v` is, indexes, or views through view methods, if any."""
        if isinstance(v, ast.Name):
            return self.alias.get(v.id)
        if isinstance(v, ast.Subscript) and isinstance(v.value, ast.Name):
            return self.alias.get(v.value.id)
        if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute):
            if v.func.attr not in _VIEW_METHODS:
                return None
            base = v.func.value
            while (
                isinstance(base, ast.Call)
                and isinstance(base.func, ast.Attribute)
                and base.func.attr in _VIEW_METHODS
            ):
                base = base.func.value
            if isinstance(base, ast.Name):
                return self.alias.get(base.id)
        return None

    def _assign(self, node: ast.Assign) -> None:
        v = node.value
        src = self._viewed_input(v)
        for t in node.targets:
            if isinstance(t, ast.Name):
                if src is not None:
                    self.alias[t.id] = src
                if _is_alloc(v):
                    self.allocs.add(t.id)
                if t.id in self.globals_declared and (
                    _is_alloc(v) or (isinstance(v, ast.Name) and v.id in self.allocs)
                ):
                    self._cache(t.id, [v])
            if (
                isinstance(t, ast.Subscript)
                and isinstance(t.value, ast.Name)
                and t.value.id in self.containers
                and self._is_allocated(v)
            ):
                self._cache(t.value.id, [v])

    def _cache(self, container: str, values: list[ast.expr]) -> None:
        self.cached_in.add(container)
        self.cached_names |= {x.id for x in values if isinstance(x, ast.Name)}

    def _container_call(self, node: ast.Call, func: ast.Attribute) -> None:
        """`cache.append(t)` and the like, with an allocated tensor, on a module-level container."""
        base = func.value
        if (
            isinstance(base, ast.Name)
            and base.id in self.containers
            and func.attr in ("append", "setdefault", "update", "insert")
            and any(self._is_allocated(x) for x in node.args)
        ):
            self._cache(base.id, node.args)

    def _launch(self, node: ast.Call, func: ast.Subscript) -> None:
        """A launch kernel[grid](...) that binds an input (or a view of one) to a written pointer."""
        kname = _dotted(func.value)
        if kname not in self.kernels:
            return
        kparams, written = self.kernels[kname]
        bound = list(zip(kparams, node.args, strict=False)) + [
            (k.arg, k.value) for k in node.keywords if k.arg
        ]
        for kp, arg in bound:
            if kp in written and isinstance(arg, ast.Name) and arg.id in self.alias:
                self.found.append(
                    Finding(
                        "static:input-mutation",
                        f"passes its argument {self.alias[arg.id]!r} as {kp}, which kernel "
                        f"{kname} writes: an in-place write into an input",
                        node.lineno,
                    )
                )

    def _returns_cached(self, v: ast.expr) -> bool:
        if isinstance(v, ast.Name):
            return v.id in self.cached_names | self.cached_in
        if isinstance(v, ast.Subscript):
            return isinstance(v.value, ast.Name) and v.value.id in self.cached_in
        return (
            isinstance(v, ast.Call)
            and isinstance(v.func, ast.Attribute)
            and v.func.attr == "get"
            and isinstance(v.func.value, ast.Name)
            and v.func.value.id in self.cached_in
        )


def check_source(source: str, trusted_source: str | None = None) -> list[Finding]:
    """Findings for a candidate source, in source order, one per reason. A source that does not
    parse has none (its build fails on its own). Findings that `trusted_source` (the user's own
    kernel) also has are not reported: the user's kernel defines what is legitimate for it."""
    try:
        tree = pysource.parse(source)
    except (SyntaxError, ValueError):
        return []
    checker = _Checker()
    checker.visit(tree)
    found = checker.findings + _function_rules(tree, _jit_kernels(tree))
    unique: dict[tuple[str, str], Finding] = {}
    for f in found:
        unique.setdefault((f.guard, f.detail), f)
    result = sorted(unique.values(), key=lambda f: f.line)
    if trusted_source is not None:
        allowed = {(f.guard, f.detail) for f in check_source(trusted_source)}
        result = [f for f in result if (f.guard, f.detail) not in allowed]
    return result
