"""Statistics of benchmark samples: pure functions, no I/O, deterministic.

All times are microseconds. A speedup is baseline time / candidate time (> 1 means faster).

Confidence interval of the weighted geometric-mean speedup (`speedup_interval`): a stratified
percentile bootstrap. Each resample draws, independently for every case and for each side
(baseline, candidate), as many samples with replacement as were measured, takes the medians, and
computes the weighted geometric mean of the median ratios; the interval is the
((1-confidence)/2, 1-(1-confidence)/2) quantiles of `resamples` such means. The generator is
seeded with a fixed seed, so the same samples always give the same interval (replay re-decides
identically). The default confidence is 0.99 (a one-sided 0.5% lower tail).

Samples measured in one window (`blocked_interval`): the reference and the candidate were
benchmarked alternately in one process, block by block (each block one harness call per side,
per case). Their interval is a paired two-stage bootstrap: each resample draws, per case, as many
blocks as were measured with replacement (a drawn block brings the samples of both sides: the
pairing keeps what the two shared in that stretch of time, such as the machine's load), then
within every drawn block as many samples with replacement as it holds, side by side; the speedup
of a resample is the weighted geometric mean of the ratios of the pooled medians. The first stage
carries the variation between harness calls (a fresh input, another allocation, a clock that
moved), which samples of one call do not show; the second keeps the interval continuous when
there are few blocks. The simulations in benchmarks/noise_sim.py measure how often the 99%
interval misses the truth under lognormal, bimodal and drifting noise rather than trusting the
nominal level.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

DEFAULT_CONFIDENCE = 0.99
DEFAULT_RESAMPLES = 2000
BOOTSTRAP_SEED = 20261130


def _array(samples_us: Sequence[float]) -> np.ndarray:
    a = np.asarray(samples_us, dtype=float)
    if a.size == 0:
        raise ValueError("no samples")
    return a


def _sorted(samples_us: Sequence[float]) -> list[float]:
    s = sorted(float(x) for x in samples_us)
    if not s:
        raise ValueError("no samples")
    return s


def quantile(samples_us: Sequence[float], q: float) -> float:
    """The q-quantile, linearly interpolated between order statistics (numpy's default)."""
    s = _sorted(samples_us)
    pos = q * (len(s) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def median(samples_us: Sequence[float]) -> float:
    """The median (mean of the two middle samples for an even count)."""
    return quantile(samples_us, 0.5)


def p95(samples_us: Sequence[float]) -> float:
    """The 95th percentile, linearly interpolated between order statistics."""
    return quantile(samples_us, 0.95)


def cv(samples_us: Sequence[float]) -> float:
    """Coefficient of variation: sample standard deviation (n-1) over the mean; 0 for one sample
    and exactly 0 for constant samples (the float sums would leave ~1e-16 for some values, and
    max_cv 0 admits only CV 0)."""
    s = _sorted(samples_us)
    if len(s) < 2 or s[0] == s[-1]:
        return 0.0
    mean = math.fsum(s) / len(s)
    var = math.fsum((x - mean) ** 2 for x in s) / (len(s) - 1)
    return math.sqrt(var) / mean


@dataclass(frozen=True)
class Summary:
    """The numbers of one case's samples, as everything tlxdb shows them (the result, the live
    log, the provider's context) and as queries/views/case_results.sql computes them in SQL."""

    samples: int
    median_us: float
    p95_us: float
    cv: float


def summarize(samples_us: Sequence[float]) -> Summary:
    """Count, median, p95 and CV of one case's samples."""
    return Summary(len(samples_us), median(samples_us), p95(samples_us), cv(samples_us))


def per_case(samples_by_case: Mapping[str, Sequence[float]]) -> dict[str, Summary]:
    """summarize() of every case that has samples, in the mapping's order."""
    return {case: summarize(s) for case, s in samples_by_case.items() if len(s)}


def weighted_geomean(values: Sequence[float], weights: Sequence[float]) -> float:
    """exp(sum w_i log v_i / sum w_i); values and weights must be positive."""
    v = np.asarray(values, dtype=float)
    w = np.asarray(weights, dtype=float)
    if v.size == 0 or v.size != w.size:
        raise ValueError("values and weights must be non-empty and of equal length")
    if np.any(v <= 0) or np.any(w <= 0):
        raise ValueError("values and weights must be positive")
    return float(math.exp(float(np.sum(w * np.log(v)) / np.sum(w))))


def speedup(
    baseline_us: Mapping[str, Sequence[float]],
    candidate_us: Mapping[str, Sequence[float]],
    weights: Mapping[str, float],
) -> float:
    """Weighted geometric mean over the cases of median(baseline) / median(candidate)."""
    cases = list(weights)
    ratios = [median(baseline_us[c]) / median(candidate_us[c]) for c in cases]
    return weighted_geomean(ratios, [weights[c] for c in cases])


def _row_medians(x: np.ndarray) -> np.ndarray:
    """The median of each row (a full sort is faster than np.median for short rows)."""
    s = np.sort(x, axis=1)
    n = s.shape[1]
    return s[:, n // 2] if n % 2 else (s[:, n // 2 - 1] + s[:, n // 2]) / 2.0


def speedup_interval(
    baseline_us: Mapping[str, Sequence[float]],
    candidate_us: Mapping[str, Sequence[float]],
    weights: Mapping[str, float],
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float]:
    """(low, high) of the stratified percentile bootstrap interval of `speedup` (see module doc)."""
    if not 0 < confidence < 1:
        raise ValueError("confidence must be in (0, 1)")
    rng = np.random.default_rng(seed)
    total_w = float(sum(weights[c] for c in weights))
    log_means = np.zeros(resamples)
    for case, w in weights.items():
        for sign, samples in ((1.0, baseline_us[case]), (-1.0, candidate_us[case])):
            a = _array(samples)
            idx = rng.integers(0, a.size, size=(resamples, a.size))
            log_means += sign * (w / total_w) * np.log(_row_medians(a[idx]))
    tail = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(log_means, [tail, 1.0 - tail])
    return float(math.exp(lo)), float(math.exp(hi))


Blocks = Sequence[Sequence[float]]
"""The samples of one side of one case in a window, one list per alternation block."""


def _two_stage_log_medians(
    blocks: Blocks, picks: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """log median of each resample: the blocks `picks` names (resamples x blocks), each drawn
    with replacement within itself."""
    sizes = np.array([len(b) for b in blocks])
    if np.any(sizes == 0):
        raise ValueError("a block without samples")
    widest = int(sizes.max())
    padded = np.full((len(blocks), widest), np.nan)
    for i, b in enumerate(blocks):
        padded[i, : len(b)] = np.asarray(b, dtype=float)
    chosen = sizes[picks]  # resamples x blocks: the size of each drawn block
    within = (rng.random((*picks.shape, widest)) * chosen[..., None]).astype(np.int64)
    values = padded[picks[..., None], within]
    if np.all(sizes == widest):
        return np.log(_row_medians(values.reshape(len(picks), -1)))
    values[np.arange(widest) >= chosen[..., None]] = np.nan  # draws beyond a block's own size
    return np.log(np.nanmedian(values.reshape(len(picks), -1), axis=1))


def blocked_speedup(
    reference: Mapping[str, Blocks], candidate: Mapping[str, Blocks], weights: Mapping[str, float]
) -> float:
    """`speedup` of the pooled samples of every block."""
    flat = lambda side: {c: [x for b in side[c] for x in b] for c in weights}  # noqa: E731
    return speedup(flat(reference), flat(candidate), weights)


def blocked_interval(
    reference: Mapping[str, Blocks],
    candidate: Mapping[str, Blocks],
    weights: Mapping[str, float],
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float]:
    """(low, high) of the paired two-stage bootstrap interval of `blocked_speedup` (module doc).
    Both sides of a case must have the same number of blocks (block i of one was measured
    beside block i of the other)."""
    if not 0 < confidence < 1:
        raise ValueError("confidence must be in (0, 1)")
    if all(len(reference[c]) == 1 and len(candidate[c]) == 1 for c in weights):
        # one block a side: the within-block bootstrap alone, as speedup_interval draws it
        return speedup_interval(
            {c: reference[c][0] for c in weights},
            {c: candidate[c][0] for c in weights},
            weights,
            confidence=confidence,
            resamples=resamples,
            seed=seed,
        )
    tail = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(
        _blocked_log_resamples(reference, candidate, weights, resamples, seed), [tail, 1.0 - tail]
    )
    return float(math.exp(lo)), float(math.exp(hi))


def _blocked_log_resamples(
    reference: Mapping[str, Blocks],
    candidate: Mapping[str, Blocks],
    weights: Mapping[str, float],
    resamples: int,
    seed: int,
) -> np.ndarray:
    """The log speedup of each resample of blocked_interval's paired two-stage bootstrap."""
    rng = np.random.default_rng(seed)
    total_w = float(sum(weights.values()))
    log_means = np.zeros(resamples)
    for case, w in weights.items():
        ref, cand = reference[case], candidate[case]
        if len(ref) != len(cand) or not ref:
            raise ValueError(f"case {case}: {len(ref)} reference and {len(cand)} candidate blocks")
        picks = rng.integers(0, len(ref), size=(resamples, len(ref)))
        log_means += (w / total_w) * (
            _two_stage_log_medians(ref, picks, rng) - _two_stage_log_medians(cand, picks, rng)
        )
    return log_means


@dataclass(frozen=True)
class Control:
    """Instances of one source (builds of it loaded into one harness child) measured in one
    window. Their sources are equal, so what sets their times apart beyond the window's noise is
    the instances'. Over every two of them: `mean_square`, the mean of the squared log ratio of
    their times (the weighted geometric mean of one's median over the other's, as
    blocked_speedup), and `noise_variance`, the mean of the variance the window's noise gives
    such a ratio (the paired two-stage bootstrap's); `df`: the instances less one."""

    mean_square: float
    noise_variance: float
    df: int


def control(
    instances: Sequence[Mapping[str, Blocks]],
    weights: Mapping[str, float],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> Control:
    """The Control of two or more instances of one source, their blocks paired by index as in
    blocked_interval."""
    if len(instances) < 2:
        raise ValueError("a control needs two instances of a source")
    squares: list[float] = []
    noises: list[float] = []
    for i, first in enumerate(instances):
        for second in instances[i + 1 :]:
            squares.append(math.log(blocked_speedup(first, second, weights)) ** 2)
            draws = _blocked_log_resamples(first, second, weights, resamples, seed + len(noises))
            noises.append(float(np.var(draws, ddof=1)))
    return Control(
        math.fsum(squares) / len(squares), math.fsum(noises) / len(noises), len(instances) - 1
    )


@dataclass(frozen=True)
class InstanceVariance:
    """How far two instances of one source run apart, on the scale of a log speedup, from `df`
    controls (one degree of freedom each): `variance`, sigma_I^2 of one instance around its
    source, the windows' noise taken out; `spread`, half the mean square of the controls' log
    ratios, noise included (sigma_I^2 + noise / 2: what two instances measured in a window
    differ by, over two). The interval carries `spread` (instance_interval)."""

    variance: float
    spread: float
    df: int

    @property
    def sigma(self) -> float:
        return math.sqrt(self.variance)


def instance_variance(controls: Sequence[Control]) -> InstanceVariance:
    """sigma_I^2 from controls: the log ratio of two instances of one source is the difference
    of their effects plus the window's noise, so E[log ratio^2] = 2 sigma_I^2 + noise variance;
    over the k instances of a control, half the mean square is their sample variance, with k - 1
    degrees of freedom. Pooled over every control, weighted by its degrees of freedom: `spread`,
    and `variance` = spread less the noise (half the noise variances, pooled alike), never below
    0. No controls: 0 with 0 degrees of freedom (nothing measured it)."""
    df = sum(c.df for c in controls)
    if not df:
        return InstanceVariance(0.0, 0.0, 0)
    spread = math.fsum(c.df * c.mean_square for c in controls) / (2 * df)
    noise = math.fsum(c.df * c.noise_variance for c in controls) / (2 * df)
    return InstanceVariance(max(0.0, spread - noise), spread, df)


Pair = tuple[Mapping[str, Blocks], Mapping[str, Blocks]]
"""The reference's and the candidate's blocks of one window (paired by index)."""


def instance_interval(
    instance_pairs: Sequence[Sequence[Pair]],
    weights: Mapping[str, float],
    instances: InstanceVariance,
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float, float]:
    """(speedup, low, high) over independent pairs of instances of the two sources: each pair's
    log speedup is the mean over the windows it was measured in (`instance_pairs[i]`, each
    window's blocks as blocked_speedup takes them), the speedup the exp of the mean over the
    pairs. The interval draws every window's paired two-stage bootstrap (blocked_interval)
    independently and adds to each resample the instances' own term: each pair differs by two
    instances' effects (variance 2 sigma_I^2), the mean of n pairs by 2 sigma_I^2 / n, drawn as
    a Student t of the estimate's degrees of freedom scaled to that standard deviation (the
    variance is estimated from few controls: a normal term would trust it as if known). Without
    degrees of freedom (no control measured it), or with an estimate of 0, the term is left
    out."""
    if not 0 < confidence < 1:
        raise ValueError("confidence must be in (0, 1)")
    if not instance_pairs or not all(instance_pairs):
        raise ValueError("every pair of instances needs a window")
    point = 0.0
    log_means = np.zeros(resamples)
    seeds = iter(range(seed, seed + sum(len(p) for p in instance_pairs)))
    for windows in instance_pairs:
        for ref, cand in windows:
            share = 1.0 / (len(instance_pairs) * len(windows))
            point += share * math.log(blocked_speedup(ref, cand, weights))
            log_means += share * _blocked_log_resamples(ref, cand, weights, resamples, next(seeds))
    if instances.df > 0 and instances.variance > 0:
        rng = np.random.default_rng(seed - 1)
        scale = math.sqrt(2.0 * instances.variance / len(instance_pairs))
        log_means += scale * rng.standard_t(instances.df, resamples)
    tail = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(log_means, [tail, 1.0 - tail])
    return math.exp(point), float(math.exp(lo)), float(math.exp(hi))
