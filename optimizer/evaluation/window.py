"""Measurement windows: how a candidate and its references are benchmarked side by side.

A window is one evaluation's benchmark: the candidate and its references (the baseline, and the
incumbent when that is another candidate) are built in one harness child and benchmarked
alternately, block by block. A block is one harness `benchmark()` call per member and case. Two
members run A B in the first half of the window's first blocks and B A in the second (A B A B A B
B A B A B A); three or more turn by one place each block (a Latin square for three); extra
blocks turn by one place. So each member is first in as many blocks as every other, and a
linear drift over the window, or a swing of the clock every 2, 3 or 4 calls, weighs on every
member alike (`order`). Each member's first call on a case in a window comes after one warm-up
call, whose samples no statistic reads (optimizer.evaluation.pipeline.measure_window: a reference's
first call compiles its kernels or runs its autotuner's search). Every comparison a decision
makes is between samples of one window: no candidate is compared with samples taken earlier, in
another process.

After its first blocks, a case whose samples (of any member, in this window) are noisier than
max_cv gets more blocks, a whole turn at a time, up to `max_extra_blocks`: a noise burst is
diluted and a noisy case is measured more before anything is decided. A case with a call that ran
while the GPU throttled or was shared (a marked call, optimizer.decision.machine) gets more turns
until as many blocks as it had marked calls were measured again, up to MAX_REMEASURED_BLOCKS; the
decision leaves the marked calls out, and so does the noise check. Every sample is recorded; none is dropped. These are pure
functions; optimizer.evaluation.pipeline (`measure_window`) runs the calls.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TypeVar

from optimizer.decision import stats

SAMPLES_PER_CALL = 2
"""Repetitions asked of one harness call in a window.
Many short calls rather than one long one: the interval of a window is a bootstrap over blocks,
and the variation between harness calls (a fresh input, another allocation, the clock) shows only
between calls. Simulated (benchmarks/noise_sim.py): with a 3% call-to-call effect, 10 samples in
one call gave 99% intervals that missed 1.0 in 72% of A/A comparisons; in 5 calls of 2, 0.3-1%."""

MAX_REMEASURED_BLOCKS = 6
"""Blocks a window adds at most for marked calls: enough to outlast a short neighbour (a
notebook's cell, a monitoring probe) and a thermal excursion; a GPU shared for longer leaves its
cases undecided (the decision fails them unmeasured) rather than keeping the run waiting."""

GPU_WARM_UP_S = 2.0
"""Seconds of warm-up calls before a window's first samples on a GPU (on the CPU: one call).
Measured on the H200 (the A/A run r20261204-082226-b3f0e6; its export is in git at f3c04e3):
after the GPU idled through a build, a 4096^3 fp16 GEMM's first do_bench ran 13% fast (boost
clock), then the power limit swung the clock for about two seconds: in every A/A window the
window's 4th and 8th harness calls (0.9 and 1.7 s in, at 0.24 s a call) had a sample 5-14% slow.
With one warm-up call those calls fell on the candidate, so each of five A/A decisions read
0.983-0.990 for an identical kernel (benchmarks/noise_sim.py's "every 4th call" models: the
same pattern made the candidate 5% slow with the turn order of then, promoted noise 3.1% of the
time with a random one, and weighs on both members under `order` now).
Two seconds of load before the first sample take the window past the swing. They did not take
away the bias: 30 A/A decisions on that GEMM with the warm-up still read 0.985 (median), the
candidate's instance about 1.5% slower in every block whichever side went first
(benchmarks/results/h200_noise_2026-12-04/README.md). A probe there found it belongs to the
first window, not to the instance: the same instance ran level with the reference's in a second
window (median 1.002), and copies built one after another and timed outside tlxdb did not differ
by build order. Call by call, A's calls 4-5 and 8-9 ran 1-2% over the reference's neighbouring
pairs. That is either the role, or a clock swing of about four calls in step with the turn order
of then (A R, R A put calls 4k and 4k+1 on A). Its cause is not known yet; `order` now spreads
such a swing over both members."""

SECOND_WINDOW_INSTANCES = 3
"""Instances of each member a second window measures (remeasure_window): the first window's, and
the member built again twice. Each source's instances are a control of how far instances of one
source run apart (optimizer.decision.stats.instance_variance: 2 degrees of freedom a source) and
each new build a pair of instances of the candidate and its references of its own. Simulated
(benchmarks/noise_sim.py, 1000 A/A decisions a model, each a run's first second window): with
two instances a source (2 degrees of freedom) identical kernels whose instances run 1% and 2%
apart were promoted in 1.3% and 1.1% of decisions, the estimate of their variance 0 too often;
with three (4), in 0.8% and 0.5%."""

MAX_WARM_UP_CALLS = 50
"""Warm-up calls a window makes at most, however short each is (a 10 us kernel's do_bench)."""

T = TypeVar("T")


def per_call(repetitions: int) -> int:
    """The repetitions each harness call of a window asks for."""
    if repetitions < 1:
        raise ValueError("repetitions must be at least 1")
    return min(SAMPLES_PER_CALL, repetitions)


def samples_asked(window_id: str | None, repetitions: int) -> int:
    """The samples one harness call was asked for: per_call(repetitions) in a window, all
    `repetitions` in a call measured alone (evidence from before windows)."""
    return repetitions if window_id is None else per_call(repetitions)


def first_blocks(repetitions: int, members: int) -> int:
    """How many blocks every case gets first: `repetitions` samples per member in calls of
    per_call(repetitions), rounded up to whole turns of the members' order, so that each member
    is measured first (and second, ...) in as many blocks as every other: a drift within a block
    favours none. (10 repetitions: 5 blocks alone, 6 beside one or two references.)"""
    calls = math.ceil(repetitions / per_call(repetitions))
    return math.ceil(calls / members) * members


def extra_turns(max_extra_blocks: int, members: int) -> int:
    """How many whole turns of extra blocks (one block per member) fit in max_extra_blocks."""
    return max_extra_blocks // members


def turned(members: Sequence[T], places: int) -> list[T]:
    """`members` turned by `places` places (1: B C A for A B C)."""
    k = places % len(members)
    return list(members[k:]) + list(members[:k])


def order(members: Sequence[T], block: int, first: int) -> list[T]:
    """The members in the order block `block` of a window measures them, `first` its first
    blocks (first_blocks). Two members: A B in the first half of the first blocks, B A in the
    second, then turned by one place per block; more: turned by one place per block.
    Why not A B, B A, A B ... for two as for more: its calls run A B B A A B B A A B B A, so
    anything that repeats every four calls lands on one member. It did on the H200: a 4096^3
    GEMM's clock swung with a period of about four calls (0.24 s each) after a build, and the
    candidate's calls 4-5 and 8-9 ran 1-2% over the reference's neighbours in 30 A/A windows
    (benchmarks/README.md, `first_window_calls`). Of the 20 orders of 6 blocks of two that put
    each member first three times, that rotation is the only one, with its mirror image, that puts
    all six of the calls 4k and 4k+1 on one member; this one puts four on one and two on the
    other, the fewest possible in 12 calls, and balances a drift and a swing of 2, 3 or 6 calls.
    Simulated (benchmarks/order_sim.py, 1000 A/A decisions a model): under a 2% swing of
    four calls the rotation read a median 0.9825 with 82.2% of the 99% intervals excluding 1.0;
    this order 0.9956 and 0.0%, at no cost elsewhere (lognormal, drift and bimodal noise: 0-0.1%
    excluding under both). On the H200 under this order the same GEMM's 13 A/A decisions read a
    median 1.002, none excluding 1.0; the slow calls 4-5 and 8-9 now fall on both members
    (`first_window_calls_halves`)."""
    if len(members) != 2 or block >= first:
        return turned(members, block)
    return turned(members, int(block >= first // 2))


def noisy_cases(
    samples: Mapping[str, Mapping[str, Sequence[float]]], cases: Sequence[str], max_cv: float
) -> list[str]:
    """The cases (in `cases` order) whose samples, for some member (samples[member][case]), have
    a CV above max_cv."""
    return [
        case
        for case in cases
        if any(len(s.get(case, ())) > 1 and stats.cv(s[case]) > max_cv for s in samples.values())
    ]


def revalidation_repetitions(repetitions: int, alternations: int) -> int:
    """Samples per side and case a final revalidation asks for: `alternations` windows' worth."""
    return repetitions * alternations


def replicate_repetitions(repetitions: int, replicates: int) -> int:
    """The `repetitions` each of a final revalidation's replicates is given (each measures
    revalidation_repetitions of them): the run's repetitions shared among the replicates, so
    that together they take about the samples one revalidation took."""
    return max(1, -(-repetitions // replicates))
