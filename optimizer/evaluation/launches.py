"""Every launch of every Triton kernel, observed at run time in the harness child.

`observing()` wraps the `run` of Triton's JIT function and of the interpreter's function (the
call every launch goes through: `kernel[grid](...)`, an autotuner's or heuristics' chosen
config, a launch from a helper) for the duration of a `with` block and records, per launch, the
kernel's name, its integer `tl.constexpr` values, num_warps, num_stages, the grid and the wall
time of the launch. On a GPU the device is synchronized before and after each observed launch,
so the wall time is the kernel's; on the interpreter the launch is the computation itself.
Identical launches (same kernel, values and grid) are counted together.

Invariant: outside `observing()` nothing is wrapped; the wrapper never changes an argument.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from tlxstore.events import KernelLaunch

DEFAULT_NUM_WARPS = 4
DEFAULT_NUM_STAGES = 3


def _classes() -> list[type]:
    """The Triton classes whose `run` every launch goes through (those importable here)."""
    out: list[type] = []
    with contextlib.suppress(ImportError):
        from triton.runtime.jit import JITFunction

        out.append(JITFunction)
    with contextlib.suppress(ImportError):
        from triton.runtime.interpreter import InterpretedFunction

        out.append(InterpretedFunction)
    return out


def _constexpr_names(fn: Any) -> list[str]:
    params = getattr(fn, "params", None)
    if params is not None:  # JITFunction
        return [p.name for p in params if getattr(p, "is_constexpr", False)]
    import inspect

    out = []
    for name, p in inspect.signature(fn.fn).parameters.items():
        annotation = p.annotation
        text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
        if str(text).split(".")[-1] == "constexpr":
            out.append(name)
    return out


def _sync(fn: Any) -> None:
    if type(fn).__name__ == "InterpretedFunction":
        return
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.synchronize()


class _Recorder:
    def __init__(self) -> None:
        self.launches: dict[tuple, KernelLaunch] = {}

    def record(self, fn: Any, args: tuple, kwargs: dict[str, Any], grid: Any, us: float) -> None:
        names = list(getattr(fn, "arg_names", []))
        bound = {**dict(zip(names, args, strict=False)), **kwargs}
        constexprs = {
            n: int(bound[n]) for n in _constexpr_names(fn) if n in bound and type(bound[n]) is int
        }
        if callable(grid):
            with contextlib.suppress(Exception):
                grid = grid(bound)
        dims = [
            int(g)
            for g in (grid if isinstance(grid, tuple | list) else (grid,))
            if isinstance(g, int)
        ]
        warps = kwargs.get("num_warps")
        stages = kwargs.get("num_stages")
        launch = KernelLaunch(
            kernel=getattr(getattr(fn, "fn", None), "__name__", type(fn).__name__),
            constexprs=constexprs,
            num_warps=DEFAULT_NUM_WARPS if warps is None else int(warps),
            num_stages=DEFAULT_NUM_STAGES if stages is None else int(stages),
            grid=dims,
            count=1,
            total_us=us,
        )
        key = (
            launch.kernel,
            tuple(sorted(constexprs.items())),
            launch.num_warps,
            launch.num_stages,
            tuple(dims),
        )
        old = self.launches.get(key)
        self.launches[key] = (
            launch
            if old is None
            else old.model_copy(update={"count": old.count + 1, "total_us": old.total_us + us})
        )


def _wrap(original: Callable[..., Any], recorder: _Recorder) -> Callable[..., Any]:
    def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        if warmup:
            return original(self, *args, grid=grid, warmup=warmup, **kwargs)
        _sync(self)
        start = time.perf_counter()
        out = original(self, *args, grid=grid, warmup=warmup, **kwargs)
        _sync(self)
        recorder.record(self, args, kwargs, grid, (time.perf_counter() - start) * 1e6)
        return out

    return run


@contextlib.contextmanager
def observing() -> Iterator[list[KernelLaunch]]:
    """Record every Triton launch inside the block; the list fills when the block ends."""
    recorder = _Recorder()
    out: list[KernelLaunch] = []
    originals = {cls: cls.__dict__["run"] for cls in _classes() if "run" in cls.__dict__}
    for cls, original in originals.items():
        cls.run = _wrap(original, recorder)  # type: ignore[attr-defined]
    try:
        yield out
    finally:
        for cls, original in originals.items():
            cls.run = original  # type: ignore[attr-defined]
        out.extend(recorder.launches.values())


def dominant_first(launches: list[KernelLaunch]) -> list[str]:
    """Kernel names, the one with the most observed time first. Give it launches of a
    verification after the first: the first launch of a kernel includes its JIT compile."""
    total: dict[str, float] = {}
    for launch in launches:
        total[launch.kernel] = total.get(launch.kernel, 0.0) + launch.total_us
    return sorted(total, key=lambda k: -total[k])


def observed_values(
    launches: list[KernelLaunch],
) -> tuple[tuple[str, tuple[tuple[str, int], ...]], ...]:
    """One (kernel, ((parameter, value), ...)) per distinct launch: every integer constexpr,
    num_warps and num_stages it had, parameters sorted. Launches of one kernel that disagree
    (cases of different shapes) are kept apart, so which values went together stays known."""
    seen = {
        (
            launch.kernel,
            tuple(
                sorted(
                    {
                        **launch.constexprs,
                        "num_warps": launch.num_warps,
                        "num_stages": launch.num_stages,
                    }.items()
                )
            ),
        )
        for launch in launches
    }
    return tuple(sorted(seen))
