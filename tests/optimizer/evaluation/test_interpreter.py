"""optimizer.evaluation.interpreter: triton.testing.do_bench's arguments and return values, timed
on the CPU clock (the harness child installs it on the interpreter)."""

from __future__ import annotations

import time

import pytest

from optimizer.decision import stats
from optimizer.evaluation import interpreter


def sleeper(ms: float, calls: list[float]):
    def fn() -> None:
        calls.append(time.perf_counter())
        time.sleep(ms / 1e3)

    return fn


def test_do_bench_returns_milliseconds_as_triton_does():
    calls: list[float] = []
    fn = sleeper(2.0, calls)
    mean = interpreter.do_bench(fn, warmup=0, rep=10)
    assert isinstance(mean, float) and 2.0 <= mean < 20.0
    assert 1 + interpreter.MIN_CALLS <= len(calls) <= 1 + 10  # one estimate, then about rep ms
    three = interpreter.do_bench(fn, warmup=0, rep=6, quantiles=[0.5, 0.2, 0.8])
    assert isinstance(three, list) and len(three) == 3 and three[1] <= three[0] <= three[2]
    one = interpreter.do_bench(fn, warmup=0, rep=6, quantiles=[0.5])
    assert isinstance(one, float)  # one quantile is a number, as in Triton
    every = interpreter.do_bench(fn, warmup=0, rep=6, return_mode="all")
    assert isinstance(every, list) and len(every) >= interpreter.MIN_CALLS
    with pytest.raises(ValueError, match="return_mode 'p99'"):
        interpreter.do_bench(fn, return_mode="p99")


def test_gradients_are_cleared_before_each_timed_call():
    class Tensor:
        grad: object = "stale"

    t = Tensor()
    seen: list[object] = []
    interpreter.do_bench(lambda: seen.append(t.grad), warmup=0, rep=0, grad_to_none=[t])
    assert seen[0] == "stale" and seen[1:] == [None] * interpreter.MIN_CALLS


def test_the_quantiles_interpolate_between_order_statistics_as_triton():
    # do_bench's quantiles are stats.quantile's: linear between order statistics, as Triton's
    assert stats.quantile([4.0, 1.0, 3.0, 2.0], 0.5) == 2.5
    assert stats.quantile([1.0, 2.0, 3.0], 0.0) == 1.0
    assert stats.quantile([1.0, 2.0, 3.0], 1.0) == 3.0
