"""Triton's GPU timers on the CPU interpreter (TRITON_INTERPRET=1).

`triton.testing.do_bench` (how most GPU harnesses time a call) and an @triton.autotune list of
several configs (which times each config before a key's first launch) both ask the active GPU
driver for events and a cache to flush; on the interpreter there is none, and the call raises "0
active drivers": a harness or kernel written for the GPU, the Triton matmul tutorial's as written,
could not run on a CPU machine at all. The harness child (optimizer.evaluation.child) installs
`do_bench` in their place there, before the harness is imported: the same arguments and return
values, timed on the CPU clock. Such timings measure the interpreter, as every CPU timing of tlxdb
does and says; an autotune list then keeps the config fastest under the interpreter, which says
nothing of a GPU (tlxdb's tune provider pins one config per candidate anyway:
optimizer.providers.knobs.pin_autotune).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from optimizer.decision import stats

MIN_CALLS, MAX_CALLS = 3, 100  # timed calls, whatever `rep` asks (an interpreted call is slow)


def do_bench(
    fn: Callable[[], Any],
    warmup: float = 25,
    rep: float = 100,
    grad_to_none: Sequence[Any] | None = None,
    quantiles: Sequence[float] | None = None,
    return_mode: str = "mean",
) -> float | list[float]:
    """triton.testing.do_bench on the CPU clock: milliseconds per call of `fn`, after warm-up
    calls filling about `warmup` ms, over calls filling about `rep` ms (MIN_CALLS to MAX_CALLS),
    summarized as Triton does (`quantiles` when given, else `return_mode`)."""
    if return_mode not in ("min", "max", "mean", "median", "all"):
        raise ValueError(f"return_mode {return_mode!r} is not min, max, mean, median or all")
    start = time.perf_counter()
    fn()
    estimate_ms = max((time.perf_counter() - start) * 1e3, 1e-6)
    for _ in range(min(max(0, int(warmup / estimate_ms) - 1), MAX_CALLS)):
        fn()
    times = []
    for _ in range(min(max(MIN_CALLS, int(rep / estimate_ms)), MAX_CALLS)):
        for tensor in grad_to_none or ():
            tensor.grad = None
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    if quantiles is not None:
        values = [stats.quantile(times, q) for q in quantiles]
        return values[0] if len(values) == 1 else values
    if return_mode == "all":
        return times
    summary: dict[str, Callable[[list[float]], float]] = {
        "min": min,
        "max": max,
        "mean": statistics.mean,
        "median": stats.median,
    }
    return summary[return_mode](times)


def install() -> None:
    """Put `do_bench` in place of triton.testing.do_bench and of every autotuner's timer in
    this process (before the harness is imported, so that `from triton.testing import do_bench`
    finds it too)."""
    import triton.testing
    from triton.runtime.autotuner import Autotuner

    triton.testing.do_bench = do_bench
    Autotuner.do_bench = property(lambda self: do_bench)
