"""Identity snapshots of functions a candidate could replace to fool the measurement.

Taken in the harness child after the harness is imported and before the candidate is (the
candidate is imported by `harness.build`), compared after every harness call. A candidate runs in
the same process as the harness, so it could rebind `torch.allclose` or `time.perf_counter`, or
swap the `__code__` of a harness function; any such change is reported by dotted name.

Only modules already imported are resolved (a snapshot never imports anything).
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The comparison, timing and synchronization functions harnesses rely on.
WATCHED: tuple[str, ...] = (
    "json.dumps",
    "json.loads",
    "builtins.abs",
    "builtins.all",
    "builtins.any",
    "builtins.isinstance",
    "builtins.len",
    "builtins.max",
    "builtins.min",
    "builtins.sum",
    "math.isclose",
    "math.isfinite",
    "time.perf_counter",
    "time.perf_counter_ns",
    "time.time",
    "time.time_ns",
    "time.monotonic",
    "time.monotonic_ns",
    "time.process_time",
    "statistics.median",
    "statistics.mean",
    "numpy.allclose",
    "numpy.isclose",
    "numpy.array_equal",
    "numpy.median",
    "numpy.testing.assert_allclose",
    "numpy.testing.assert_array_equal",
    "torch.allclose",
    "torch.isclose",
    "torch.equal",
    "torch.eq",
    "torch.all",
    "torch.abs",
    "torch.max",
    "torch.testing.assert_close",
    "torch.Tensor.__eq__",
    "torch.Tensor.allclose",
    "torch.Tensor.equal",
    "torch.Tensor.item",
    "torch.Tensor.tolist",
    "torch.Tensor.data_ptr",
    "torch.cuda.synchronize",
    "torch.cuda.Event",
    "torch.cuda.Event.elapsed_time",
    "torch.cuda.Event.record",
    "torch.manual_seed",
    "triton.testing.do_bench",
    "triton.testing.do_bench_cudagraph",
    "triton.testing.assert_close",
)


def _resolve(dotted: str) -> tuple[bool, Any]:
    """(found, object) for a dotted name, using only modules already in sys.modules."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        mod = sys.modules.get(".".join(parts[:i]))
        if mod is None:
            continue
        obj: Any = mod
        for attr in parts[i:]:
            try:
                obj = getattr(obj, attr)
            except Exception:
                return False, None
        return True, obj
    return False, None


def _fingerprint(obj: Any) -> tuple[int, int | None, int | None]:
    """Identity of the object, of its code object and of its defaults (a function whose
    `__code__` was swapped keeps its identity but not its code)."""
    code = getattr(obj, "__code__", None) if isinstance(obj, types.FunctionType) else None
    defaults = getattr(obj, "__defaults__", None) if code is not None else None
    return (id(obj), None if code is None else id(code), None if defaults is None else id(defaults))


@dataclass
class Snapshot:
    """Watched names -> (object kept alive, fingerprint)."""

    entries: dict[str, tuple[Any, tuple[int, int | None, int | None]]] = field(default_factory=dict)

    @classmethod
    def take(cls, extra_modules: Iterable[types.ModuleType] = ()) -> Snapshot:
        """Snapshot the WATCHED names and every function and class of `extra_modules` (the
        harness and the other modules loaded from the bundle)."""
        snap = cls()
        for name in WATCHED:
            found, obj = _resolve(name)
            if found:
                snap.entries[name] = (obj, _fingerprint(obj))
        for mod in extra_modules:
            for attr, obj in list(vars(mod).items()):
                if attr.startswith("__"):
                    continue
                if isinstance(obj, types.FunctionType | type):
                    snap.entries[f"{mod.__name__}.{attr}"] = (obj, _fingerprint(obj))
        return snap

    def changed(self) -> list[str]:
        """Dotted names whose object, code or defaults differ from the snapshot, sorted."""
        out = []
        for name, (obj, fp) in self.entries.items():
            found, now = _resolve(name)
            if not found or now is not obj or _fingerprint(now) != fp:
                out.append(name)
        return sorted(out)


def bundle_modules(bundle_root: Path) -> list[types.ModuleType]:
    """Modules in sys.modules whose file lies under the bundle folder."""
    root = bundle_root.resolve()
    out = []
    for mod in list(sys.modules.values()):
        f = getattr(mod, "__file__", None)
        if not f:
            continue
        try:
            if Path(f).resolve().is_relative_to(root):
                out.append(mod)
        except (OSError, ValueError):
            continue
    return out
