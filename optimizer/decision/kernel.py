"""What the kernel-level profiles say, as pure functions of a run's state.

- `profiling_level`: the TLX profiling policy. The deep ncu set for the baseline, for candidates
  whose speedup is within NEAR_THRESHOLD of the promotion threshold, and for the finalist; the
  summary set for every other correct candidate, except a clear loser (speedup below CLEAR_LOSER);
  nothing for a candidate that is not correct.
- `ncu_veto`: a candidate whose main kernel's ncu duration is over the baseline's by more than
  the veto's bar on any case is not promoted, however fast its benchmark: the benchmark may time
  wrapper work, caching or extra launches, ncu times the kernel alone. The baseline's duration is
  the one profiled in the candidate's own ncu process right after it (REFERENCE_DURATION), else
  the baseline's own profile (another process, minutes earlier). The bar is NCU_VETO plus the
  noise of one launch against one launch, read from the run's own evidence (`veto_bar`): every
  launch of the baseline's kernel ncu profiled in this run on that case (two in its own profile,
  and one beside each candidate since) is a draw of the same kernel, so their spread is how far
  two launches of one kernel fall apart here. (The TLX agent lifts the veto when the benchmark itself
  ran under the profiler; tlxdb never benchmarks under ncu.)
- `assess`: the roofline of each case (time from ncu, else Proton, else the benchmark median;
  bytes from ncu's DRAM counters, else the harness's bytes_moved; flops from the harness, else
  ncu's fp32 instruction counts) and the disagreement check between the three clocks.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from optimizer.decision import stats
from optimizer.units import number
from profilers.hardware import Resource, lookup_device
from profilers.ncu import DURATION, REFERENCE_DURATION
from profilers.roofline import roofline
from tlxstore.events import BASELINE_ID, ProfileCollected, RooflineAssessed, Thresholds
from tlxstore.fold import CandidateState, RunState

NEAR_THRESHOLD = 0.01  # one percentage point of speedup around min_speedup
CLEAR_LOSER = 0.5  # a candidate at half the baseline's speed or less gets no ncu profile
NCU_VETO = 0.01  # main-kernel ncu duration more than 1% (plus the launch noise) over the baseline's
VETO_Z = 2.326  # the one-sided 99% quantile of the normal distribution
MIN_BASELINE_LAUNCHES = 3
"""Launches of the baseline's kernel a case needs before their spread widens the veto's bar;
with fewer, the bar is NCU_VETO alone (the baseline's own profile takes two, so the first candidate
has three). Measured: on an H100 A/A run (benchmarks/results/
h100_ncu_pairing_2026-12-05) the ratio of an unchanged kernel's launch to the baseline's beside it
spanned 0.975-1.043 on a 13 us case (sd 2.1%) and the 1% bar vetoed one of 8; the baseline's 9
launches there had a CV of 1.29%, so the bar on that case is 1% + 2.326 x 1.41 x 1.29% = 5.2%. On
the 175 us case (CV 0.35%) it is 2.2%; on the H200's 4096^3 GEMM (ratio sd 0.2-0.3%) under 2%."""
DISAGREEMENT = 0.25  # clocks more than 25% apart are flagged in the live log
MAIN_TIME = "main_kernel_time_us"
DRAM_BYTES = ("dram__bytes_read.sum", "dram__bytes_write.sum")
POINT_FIELDS = {
    "time_us",
    "bytes_moved",
    "flops",
    "achieved_bytes_per_s",
    "achieved_flop_per_s",
    "bandwidth_fraction",
    "compute_fraction",
    "arithmetic_intensity",
}
FP32_OPS = {
    "sm__sass_thread_inst_executed_op_ffma_pred_on.sum": 2.0,
    "sm__sass_thread_inst_executed_op_fadd_pred_on.sum": 1.0,
    "sm__sass_thread_inst_executed_op_fmul_pred_on.sum": 1.0,
}


class KernelEvidence(BaseModel):
    """What tlxdb's own profiles say about the parent on one case, and how its last change moved
    it (deltas against the parent's own parent; None where unknown). A provider reads it in its
    context (optimizer/providers/base.py: ProviderContext.parent_kernel)."""

    model_config = ConfigDict(frozen=True)

    case_id: str
    main_kernel: str | None = None
    other_kernels: list[str] = []  # the rest of what the harness call launched, heaviest first
    proton_main_us: float | None = None  # per launch
    ncu_main_us: float | None = None
    bandwidth_fraction: float | None = None  # of the measured ceiling
    compute_fraction: float | None = None
    bound: str = "unknown"
    disagreement: str = ""
    deep: dict[str, float | None] = {}  # registers, occupancy, spills, stall reasons (deep set)
    ncu_delta: float | None = None  # ncu_main_us / the grandparent's - 1
    proton_delta: float | None = None
    bandwidth_fraction_delta: float | None = None  # in fraction points


class Level(StrEnum):
    SUMMARY = "summary"
    DEEP = "deep"


def _metric(cand: CandidateState, case_id: str, source: str, name: str) -> float | None:
    """The latest value of one metric of one case from one source (None: unknown)."""
    for p in reversed(cand.profiles):
        if p.case_id != case_id:
            continue
        for m in p.metrics:
            if m.source == source and m.name == name and m.value is not None:
                return m.value
    return None


def ncu_time_us(cand: CandidateState, case_id: str) -> float | None:
    """The main kernel's ncu duration (us) for one case, from tlxdb's ncu profile."""
    return _metric(cand, case_id, "ncu", DURATION)


def ncu_reference_us(cand: CandidateState, case_id: str) -> float | None:
    """The baseline's main-kernel ncu duration (us) profiled right after the candidate's, in the
    candidate's own ncu process (None: not profiled beside it)."""
    return _metric(cand, case_id, "ncu", REFERENCE_DURATION)


def proton_time_us(cand: CandidateState, case_id: str) -> float | None:
    """The main kernel's time per launch (us) under Proton for one case."""
    return _metric(cand, case_id, "proton", MAIN_TIME)


def noise_cause(cand: CandidateState, case_id: str) -> str:
    """What tlxdb knows of why a case's benchmark samples vary: how the harness's median
    compares with the main kernel's own time (ncu's, else Proton's per launch)."""
    samples = cand.samples_by_case().get(case_id)
    kernel_us = ncu_time_us(cand, case_id) or proton_time_us(cand, case_id)
    if not samples or not kernel_us:
        return "no kernel timer on this target tells the harness's own time from the kernel's"
    ratio = stats.median(samples) / kernel_us
    if ratio > 1.0 + DISAGREEMENT:
        return f"the harness times {ratio:.1f}x the kernel: launch or wrapper overhead"
    return f"the harness times the kernel itself ({ratio:.2f}x its time): the kernel's time varies"


def main_kernel(cand: CandidateState) -> str | None:
    """The main kernel the launch attribution named (the first case that has one)."""
    for p in cand.profiles:
        if any(m.source == "proton" and m.name == MAIN_TIME for m in p.metrics) and p.kernel_names:
            return p.kernel_names[0]
    return None


def needs_profiling(cand: CandidateState) -> bool:
    """Whether the kernel-level phase has not run for this candidate yet (no roofline)."""
    return not cand.rooflines


def _ncu_kernel(cand: CandidateState, case_id: str) -> str:
    """The kernel ncu profiled for a case (else the attribution's main kernel, else "?")."""
    for p in reversed(cand.profiles):
        if p.case_id == case_id and p.kernel_names and any(m.source == "ncu" for m in p.metrics):
            return p.kernel_names[0]
    return main_kernel(cand) or "?"


DEEP_SHOWN = (
    "launch__registers_per_thread",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "sm__maximum_warps_per_active_cycle_pct",
    "smsp__sass_inst_executed_op_local_ld.sum",
    "smsp__sass_inst_executed_op_local_st.sum",
    "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio",
)


def is_own_profile(p: ProfileCollected) -> bool:
    """Whether a profile is tlxdb's own (attribution or its ncu child), not the harness's."""
    own_proton = any(m.source == "proton" and m.name == MAIN_TIME for m in p.metrics)
    return own_proton or p.diagnostics.startswith("ncu ")


def _delta(now: float | None, before: float | None) -> float | None:
    return None if now is None or before is None or before == 0 else now / before - 1.0


def evidence(state: RunState, cid: str) -> list[KernelEvidence]:
    """The parent's kernel-level evidence per case, with deltas against its own parent."""
    cand = state.candidates[cid]
    parent_id = cand.proposal.parent_id
    prev = state.candidates.get(parent_id) if parent_id else None
    main = main_kernel(cand)
    rooflines = {r.case_id: r for r in cand.rooflines}
    prev_roofs = {r.case_id: r for r in prev.rooflines} if prev else {}
    cases = list(dict.fromkeys([*rooflines, *(p.case_id for p in cand.profiles)]))
    out = []
    for case_id in cases:
        roof, before = rooflines.get(case_id), prev_roofs.get(case_id)
        kernels = next(
            (
                p.kernel_names
                for p in cand.profiles
                if p.case_id == case_id and is_own_profile(p) and p.kernel_names
            ),
            [],
        )
        deep = {n: _metric(cand, case_id, "ncu", n) for n in DEEP_SHOWN}
        ncu_t, proton_t = ncu_time_us(cand, case_id), proton_time_us(cand, case_id)
        out.append(
            KernelEvidence(
                case_id=case_id,
                main_kernel=main,
                other_kernels=[k for k in kernels if k != main][:3],
                proton_main_us=proton_t,
                ncu_main_us=ncu_t,
                bandwidth_fraction=roof.bandwidth_fraction if roof else None,
                compute_fraction=roof.compute_fraction if roof else None,
                bound=roof.bound if roof else "unknown",
                disagreement=roof.disagreement if roof else "",
                deep={k: v for k, v in deep.items() if v is not None},
                ncu_delta=_delta(ncu_t, ncu_time_us(prev, case_id) if prev else None),
                proton_delta=_delta(proton_t, proton_time_us(prev, case_id) if prev else None),
                bandwidth_fraction_delta=(
                    roof.bandwidth_fraction - before.bandwidth_fraction
                    if roof
                    and before
                    and roof.bandwidth_fraction is not None
                    and before.bandwidth_fraction is not None
                    else None
                ),
            )
        )
    return out


def has_deep_profile(cand: CandidateState) -> bool:
    return any(p.diagnostics.startswith("ncu deep set") for p in cand.profiles)


def quick_speedup(state: RunState, cid: str, weights: Mapping[str, float]) -> float | None:
    """The candidate's speedup over the baseline from its samples so far (None: not measurable)."""
    base, cand = state.candidates.get(BASELINE_ID), state.candidates[cid]
    if base is None:
        return None
    b, c = base.samples_by_case(), cand.samples_by_case()
    scored = {k: w for k, w in weights.items() if b.get(k) and c.get(k)}
    return stats.speedup(b, c, scored) if scored else None


def profiling_level(
    state: RunState,
    cid: str,
    thresholds: Thresholds,
    weights: Mapping[str, float],
    protected: Collection[str],
    finalist: bool = False,
) -> Level | None:
    """Which ncu set a candidate gets (None: none). See the module doc."""
    cand = state.candidates[cid]
    if cand.build is None or not cand.build.success or cand.failures:
        return None
    if any(f.blocking for f in cand.flags):
        return None
    if any(not v.passed and v.case_id in protected for v in cand.verifications):
        return None
    if not cand.samples:
        return None
    if cid == BASELINE_ID or finalist:
        return Level.DEEP
    speedup = quick_speedup(state, cid, weights)
    if speedup is None or speedup < CLEAR_LOSER:
        return None
    if abs(speedup - thresholds.min_speedup) <= NEAR_THRESHOLD:
        return Level.DEEP
    return Level.SUMMARY


def baseline_launches(state: RunState, case_id: str) -> list[float]:
    """Every duration (us) of the baseline's main kernel that ncu took in this run on one case,
    one launch each: the baseline's own profile and the second launch right after it in the same
    process, then the one profiled beside each candidate (each in the candidate's process), in
    the order the run recorded them."""
    base = state.candidates.get(BASELINE_ID)
    own = ncu_time_us(base, case_id) if base is not None else None
    again = ncu_reference_us(base, case_id) if base is not None else None
    beside = (ncu_reference_us(c, case_id) for c in state.candidates.values() if c is not base)
    return [t for t in (own, again, *beside) if t is not None and t > 0]


def veto_bar(launches: Sequence[float]) -> tuple[float, str]:
    """How far over the baseline's duration a candidate's may run before the veto fires, and the
    reason in words: NCU_VETO, plus VETO_Z times the spread of the ratio of two single launches
    (sqrt 2 times the baseline's launch-to-launch CV) once MIN_BASELINE_LAUNCHES are known. An
    unchanged kernel is then vetoed on about 1% of cases, however short and jittery it is."""
    if len(launches) < MIN_BASELINE_LAUNCHES:
        return NCU_VETO, f"max {NCU_VETO:+.0%}"
    spread = stats.cv(launches)
    bar = NCU_VETO + VETO_Z * math.sqrt(2.0) * spread
    return bar, (
        f"max {bar:+.1%}: {NCU_VETO:.0%} + {VETO_Z} x 1.41 x the CV {spread:.2%} of "
        f"{len(launches)} launches of the baseline's kernel in this run"
    )


def ncu_veto(state: RunState, cid: str, cases: Collection[str]) -> list[str]:
    """Each case whose main-kernel ncu duration is over the baseline's by more than `veto_bar`."""
    base, cand = state.candidates.get(BASELINE_ID), state.candidates[cid]
    if base is None or cid == BASELINE_ID:
        return []
    problems = []
    for case_id in cases:
        c, beside = ncu_time_us(cand, case_id), ncu_reference_us(cand, case_id)
        b = beside if beside is not None else ncu_time_us(base, case_id)
        if b is None or c is None or b <= 0:
            continue
        over = c / b - 1.0
        bar, why = veto_bar(baseline_launches(state, case_id))
        if over > bar:
            where = "profiled after it in its process" if beside is not None else "own profile"
            problems.append(
                f"ncu veto: case {case_id} main kernel {_ncu_kernel(cand, case_id)} ran "
                f"{number(c)} us under ncu, {over:+.1%} against the baseline's {number(b)} us "
                f"({where}; {why})"
            )
    return problems


def _disagreement(clocks: dict[str, float | None]) -> str:
    known = {k: v for k, v in clocks.items() if v is not None and v > 0}
    if len(known) < 2:
        return ""
    lo, hi = min(known, key=known.__getitem__), max(known, key=known.__getitem__)
    if known[hi] / known[lo] - 1.0 <= DISAGREEMENT:
        return ""
    text = ", ".join(f"{k} {number(v)} us" for k, v in known.items())
    return (
        f"{hi} is {known[hi] / known[lo]:.2f}x {lo} ({text}): wrapper overhead, extra "
        "kernels or caching between the benchmark and the kernel"
    )


def assess(state: RunState, cid: str, device_kind: str) -> list[RooflineAssessed]:
    """The roofline point and the clock comparison of every benchmarked case of a candidate."""
    cand = state.candidates[cid]
    device = lookup_device(device_kind)
    bw = device.ceiling(Resource.DRAM_BANDWIDTH)
    fl = device.ceiling(Resource.BF16_DENSE)
    out = []
    for case_id, samples in cand.samples_by_case().items():
        if not samples:
            continue
        bench = stats.median(samples)
        ncu_t, proton_t = ncu_time_us(cand, case_id), proton_time_us(cand, case_id)
        time_us, time_source = next(
            (t, s)
            for t, s in ((ncu_t, "ncu"), (proton_t, "proton"), (bench, "benchmark"))
            if t is not None and t > 0
        )
        declared = next((s for s in reversed(cand.samples) if s.case_id == case_id), None)
        dram = [_metric(cand, case_id, "ncu", n) for n in DRAM_BYTES]
        bytes_moved: float | None
        if all(v is not None for v in dram):
            bytes_moved, bytes_source = sum(v for v in dram if v is not None), "ncu"
        elif declared is not None and declared.bytes_moved:
            bytes_moved, bytes_source = float(declared.bytes_moved), "harness"
        else:
            bytes_moved, bytes_source = None, None
        fp32 = {n: _metric(cand, case_id, "ncu", n) for n in FP32_OPS}
        flops: float | None
        if declared is not None and declared.flops:
            flops, flops_source = float(declared.flops), "harness"
        elif all(v is not None for v in fp32.values()) and any(fp32.values()):
            flops = sum(FP32_OPS[n] * (v or 0.0) for n, v in fp32.items())
            flops_source = "ncu"
        else:
            flops, flops_source = None, None
        point = roofline(device, time_us, bytes_moved, flops)
        out.append(
            RooflineAssessed(
                candidate_id=cid,
                case_id=case_id,
                **point.model_dump(include=POINT_FIELDS),
                time_source=time_source,
                bytes_source=bytes_source,
                flops_source=flops_source,
                bandwidth_ceiling_bytes_per_s=bw.value if bw else None,
                compute_ceiling_flop_per_s=fl.value if fl else None,
                bound=point.bound.value,
                benchmark_median_us=bench,
                proton_main_us=proton_t,
                ncu_main_us=ncu_t,
                disagreement=_disagreement({"benchmark": bench, "proton": proton_t, "ncu": ncu_t}),
            )
        )
    return out
