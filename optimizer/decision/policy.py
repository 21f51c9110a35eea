"""The decision policy: pure functions from a run's state (its events) to a decision event.

A candidate is compared with its references in its own measurement window (BenchmarkSampled
.window_id; optimizer.evaluation.window): the baseline and the incumbent were benchmarked beside
it, alternately, in one harness child, and the interval is the paired block bootstrap of
optimizer.decision.stats.blocked_interval. Evidence recorded before windows existed (window_id
None) is decided as it was then: against the baseline's validation samples, the incumbent's
own samples rescaled between devices in a parallel run.

`decide` promotes a candidate only when all of these hold (thresholds from the run):
1. no blocking integrity flag (a guard refused it), no harness error, it built;
2. every protected case verified on every attempt (before and after the benchmark) and has
   benchmark samples; an unprotected case that failed is left out of the score;
3. the weighted geometric-mean speedup of medians over the baseline is at least `min_speedup`,
   and the lower bound of its confidence interval is above 1.0;
4. a case noisier than `max_cv` (the candidate's CV in its window) does not block promotion, but
   then the whole interval must lie above `min_speedup`; the decision carries a note naming the
   case and its CV. Under `strict_noise` (the TLX agent's rule) such a case blocks promotion;
5. no protected case's p95 is more than MAX_P95_REGRESSION above the baseline's p95; a case
   noisier than `max_cv` (not under `strict_noise`, where it blocks) is judged on its median
   instead, its tail being its noise: its own interval (the case alone, blocks paired) must not
   lie wholly below 1 / (1 + MAX_P95_REGRESSION), a regression of more than that for certain;
6. it beats the incumbent (the last promoted candidate): measured beside it in its window, the
   speedup over the incumbent is above 1.0 with the interval's lower bound above 1.0 too; an
   incumbent promoted while the candidate was being measured (a parallel round) was not in its
   window: then the candidate's interval over the baseline must lie above the incumbent's
   decided speedup;
7. a second window, remeasure_window(candidate), holds it up. After a tripwire fired
   (non-blocking IntegrityFlagged) both windows pass 3-6 on their own (the decision reports the
   worse; no promotion on the first measurement alone). Otherwise the second window exists when
   the first alone would have promoted (owes_second_window: the loop asks the evaluator for one)
   and is not clear of the instances (clear_of_instances: the run's instance estimate already in
   its interval, CLEAR_MARGIN above every bar, no case over max_cv),
   since an instance of a kernel (a build loaded into the harness child) can run a few percent
   apart from another instance of it for a whole window: it measures the first window's
   instances beside every member built again (optimizer.evaluation.window
   .SECOND_WINDOW_INSTANCES instances of each source, alternated). Criteria 3 and 6 are then
   judged over every pair of instances of the candidate and its reference (the first pair in
   both windows, each new build a pair of its own) on stats.instance_interval: the bootstrap of
   every window, and a term for how far instances of one source run apart, estimated from the
   instances of one source in one window (instance_variance: the candidate's second window and
   those of earlier rounds); the decision notes the estimate. Once earlier rounds give one,
   a decision's interval carries it, a first window's too (one pair). A second window recorded
   before instances were (one new pair only, nothing measured between instances) is a
   replicate: its own speedup must also clear min_speedup and, beside the incumbent, be above
   1.0;
8. the ncu veto (optimizer.decision.kernel.ncu_veto): no scored case's main kernel runs longer
   under ncu than the baseline's (profiled after it in its own ncu process) by more than 1% plus
   the noise of one launch against one, which the run's own launches of the baseline's kernel
   show (kernel.veto_bar).

Every window leaves out the benchmark calls that ran while the GPU throttled or was shared
(optimizer.decision.machine: marked calls stay in the store); a case with nothing left beside
the baseline fails the candidate unmeasured (its source may come again). Whatever the outcome,
the decision notes the marked calls and the host-bound cases (machine.host_notes).

`decide_revalidation` judges a finalist from its revalidation windows only (the finalist and a
fresh baseline, same child, alternated; one window per independent replicate, each a fresh
child), never from the round-0 baseline, under rules 3-5 on their pooled blocks, and keeps it only
when the replicates agree that it wins: replicates whose speedups spread further than
`replicate_tolerance` (max / min - 1) keep it, with a note, when each of them is at least
`min_speedup` (they differ in the size of the win, not in the win); under `strict_noise`, or when
one falls short, it is refused.

Reasons name every criterion that failed, with the numbers; notes what qualified a promotion.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from optimizer.decision import kernel, machine, pooling, stats
from optimizer.units import number
from tlxstore.events import (
    BASELINE_ID,
    BenchmarkSampled,
    CaseSpeedup,
    DecisionMade,
    FailureKind,
    FinalistRevalidated,
    Outcome,
    Phase,
    Thresholds,
    remeasure_window,
    replicate_window,
)
from tlxstore.fold import CandidateState, RunState, full_measurement

MAX_P95_REGRESSION = 0.10  # a protected case's p95 may be at most 10% above the baseline's p95
TRIPWIRE_PREFIX = "tripwire:"
# A first window's promotion clear of every bar by this much, on an interval that already
# carries the run's instance estimate, is owed no second window (clear_of_instances).
CLEAR_MARGIN = 0.10
CLEAR_MIN_DF = 4  # the estimate of one earlier second window (two sources, three instances each)

Blocks = dict[str, list[list[float]]]
"""One side of a comparison: per case, its samples block by block (paired by index with the
other side's blocks); samples measured alone are one block."""


@dataclass(frozen=True)
class Comparison:
    """Candidate vs reference over the scored cases."""

    speedup: float
    ci_low: float
    ci_high: float
    cases: list[CaseSpeedup]
    blocks: stats.Pair | None = None  # (reference, candidate) the cases' numbers rest on


def _confidence_pct() -> str:
    return f"{stats.DEFAULT_CONFIDENCE * 100:g}%"


def compare_blocks(
    reference: Blocks, candidate: Blocks, weights: Mapping[str, float]
) -> Comparison:
    """Speedup of candidate over reference (geomean of the ratios of pooled medians), its
    interval (stats.blocked_interval), and the numbers of each case."""
    cases = []
    for case_id, w in weights.items():
        ref = [x for b in reference[case_id] for x in b]
        cand = [x for b in candidate[case_id] for x in b]
        ref_med, cand_med = stats.median(ref), stats.median(cand)
        cases.append(
            CaseSpeedup(
                case_id=case_id,
                weight=w,
                baseline_median_us=ref_med,
                candidate_median_us=cand_med,
                speedup=ref_med / cand_med,
                candidate_cv=stats.cv(cand),
                baseline_cv=stats.cv(ref),
                baseline_p95_us=stats.p95(ref),
                candidate_p95_us=stats.p95(cand),
                baseline_samples=len(ref),
                candidate_samples=len(cand),
            )
        )
    point = stats.blocked_speedup(reference, candidate, weights)
    low, high = stats.blocked_interval(reference, candidate, weights)
    return Comparison(point, low, high, cases, (reference, candidate))


def compare(
    reference_us: Mapping[str, list[float]],
    candidate_us: Mapping[str, list[float]],
    weights: Mapping[str, float],
) -> Comparison:
    """compare_blocks of samples measured alone (one block a side)."""
    return compare_blocks(
        {c: [list(reference_us[c])] for c in weights},
        {c: [list(candidate_us[c])] for c in weights},
        weights,
    )


def _fmt(c: Comparison) -> str:
    return f"{c.speedup:.4f}x ({_confidence_pct()} CI {c.ci_low:.4f}-{c.ci_high:.4f})"


@dataclass(frozen=True)
class Findings:
    """What one comparison says against the thresholds: criteria that failed, and notes."""

    problems: list[str]
    notes: list[str]


def measurement_problems(
    c: Comparison, thresholds: Thresholds, protected: Collection[str]
) -> Findings:
    """Every promotion criterion (3-5 of the module doc) on one comparison against the baseline
    that fails, as text, and the notes a promotion would carry."""
    problems: list[str] = []
    notes: list[str] = []
    noisy = [case for case in c.cases if case.candidate_cv > thresholds.max_cv]
    for case in noisy:
        text = f"case {case.case_id} CV {case.candidate_cv:.3f} above max {thresholds.max_cv:g}"
        if thresholds.strict_noise:
            problems.append(text)
        else:
            n = f" over {case.candidate_samples} samples" if case.candidate_samples else ""
            tail = (
                "its median checked for a regression on its own interval, not its p95"
                if case.case_id in protected
                else "its p95 not compared"
            )
            notes.append(f"{text}{n}: decided on the interval; {tail}")
    below = c.speedup < thresholds.min_speedup
    if below:
        problems.append(f"speedup {_fmt(c)} below min {thresholds.min_speedup:g}")
    if c.ci_low <= 1.0:  # the figure is said once in a reason
        figure = "" if below else f" (speedup {_fmt(c)})"
        problems.append(f"CI lower bound {c.ci_low:.4f} not above 1.0{figure}")
    elif noisy and not thresholds.strict_noise and c.ci_low <= thresholds.min_speedup:
        problems.append(
            f"CI lower bound {c.ci_low:.4f} not above min {thresholds.min_speedup:g}, as a case "
            f"noisier than max CV {thresholds.max_cv:g} needs (speedup {_fmt(c)})"
        )
    for case in c.cases:
        if case.case_id not in protected or not case.baseline_p95_us or not case.candidate_p95_us:
            continue
        if case in noisy and not thresholds.strict_noise:
            median = _noisy_case_regressed(c, case)  # its tail is its noise: its median
            problems += median.problems
            notes += median.notes
            continue
        regression = case.candidate_p95_us / case.baseline_p95_us - 1.0
        if regression > MAX_P95_REGRESSION:
            problems.append(
                f"case {case.case_id} p95 regressed {regression:.1%} "
                f"({number(case.baseline_p95_us)} -> {number(case.candidate_p95_us)} us; "
                f"max {MAX_P95_REGRESSION:.0%})"
            )
    return Findings(problems, notes)


def _noisy_case_regressed(c: Comparison, case: CaseSpeedup) -> Findings:
    """A protected case noisier than max_cv judged on its median: a problem when it regressed by
    more than MAX_P95_REGRESSION for certain (the whole interval of its own speedup, the case
    alone with its blocks paired as the decision's interval draws them, below 1 / (1 +
    MAX_P95_REGRESSION)); a note when only its point median did. Its median, not its p95: a
    noisy case's tail is its noise. On a bimodal case (launch overhead: one sample in three twice
    as slow) a median of a few dozen samples can sit in either mode, so the interval is wide and
    a point regression may be a draw: the note says so, and --strict-noise refuses the case."""
    bound = 1.0 / (1.0 + MAX_P95_REGRESSION)
    if c.blocks is None or case.speedup >= bound:
        return Findings([], [])
    ref, cand = c.blocks
    low, high = stats.blocked_interval(
        {case.case_id: ref[case.case_id]}, {case.case_id: cand[case.case_id]}, {case.case_id: 1.0}
    )
    numbers = (
        f"{case.speedup:.4f}x ({_confidence_pct()} CI {low:.4f}-{high:.4f}; median "
        f"{number(case.baseline_median_us)} -> {number(case.candidate_median_us)} us)"
    )
    if high < bound:
        problem = (
            f"protected case {case.case_id} regressed: {numbers}, wholly below {bound:.4f} (max "
            f"{MAX_P95_REGRESSION:.0%} slower); its CV {case.candidate_cv:.3f} is above max CV, "
            "so its median is judged, not its p95"
        )
        return Findings([problem], [])
    note = (
        f"protected case {case.case_id} read {numbers}: more than {MAX_P95_REGRESSION:.0%} "
        "slower at its median, but too noisy to tell a regression from a draw (--strict-noise "
        "refuses a case this noisy)"
    )
    return Findings([], [note])


def _failed(cid: str, reason: str, compared_to: str | None = None) -> DecisionMade:
    return DecisionMade(
        candidate_id=cid, outcome=Outcome.FAILED, reason=reason, compared_to=compared_to
    )


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _gate(
    cand: CandidateState, protected: Collection[str], phase: Phase | None
) -> DecisionMade | None:
    """A refusal or failure that no measurement can outweigh, or None."""
    cid = cand.candidate_id
    blocking = [f for f in cand.flags if f.blocking]
    if blocking:
        return DecisionMade(
            candidate_id=cid,
            outcome=Outcome.REJECTED,
            reason=f"integrity guard {blocking[0].guard}: {blocking[0].detail}",
        )
    for failure in cand.failures:
        if failure.kind == FailureKind.HARNESS_ERROR:
            return _failed(
                cid, f"harness error during {failure.stage}: {_first_line(failure.diagnostics)}"
            )
    if cand.failures:
        last = cand.failures[-1]
        return _failed(
            cid,
            f"{last.kind.value} during {last.stage} (retryable): {_first_line(last.diagnostics)}",
        )
    if cand.build is None:
        return _failed(cid, "no build result")
    if not cand.build.success:
        return _failed(
            cid, f"build failed: {_first_line(cand.build.diagnostics) or 'no diagnostics'}"
        )
    verifications = [v for v in cand.verifications if phase is None or v.phase == phase]
    for v in verifications:
        if not v.passed and v.case_id in protected:
            detail = _first_line(v.diagnostics)
            return _failed(
                cid,
                f"protected case {v.case_id} failed verification (attempt {v.attempt}, seed {v.seed})"
                + (f": {detail}" if detail else ""),
            )
    verified = {v.case_id for v in verifications if v.passed}
    missing = [c for c in protected if c not in verified]
    if missing:
        return _failed(cid, f"protected case {missing[0]} was never verified")
    return None


def _scored(
    weights: Mapping[str, float],
    protected: Collection[str],
    cand: CandidateState,
    cand_samples: Mapping[str, Collection[object]],
    ref_samples: Mapping[str, Collection[object]],
) -> tuple[dict[str, float], str | None]:
    """The cases that count (weights) and a failure reason when a protected case cannot count."""
    failed_unprotected = {v.case_id for v in cand.verifications if not v.passed}
    scored = {}
    for case_id, w in weights.items():
        if case_id in failed_unprotected and case_id not in protected:
            continue
        if not cand_samples.get(case_id):
            if case_id in protected:
                return {}, f"no benchmark samples for protected case {case_id}"
            continue
        if not ref_samples.get(case_id):
            return {}, f"no reference samples for case {case_id}"
        scored[case_id] = w
    if not scored:
        return {}, "no case could be scored"
    return scored, None


# ---- windows ----------------------------------------------------------------------------------


def window_blocks(
    state: RunState, window_id: str, phase: Phase, instance: int = 1
) -> dict[str, dict[str, dict[int, list[float]]]]:
    """Every member's samples in one window, of one instance of each source (BenchmarkSampled
    .instance): member -> case -> block -> samples; the calls that ran while the GPU throttled or
    was shared (machine.marked_calls) left out."""
    marked = machine.marked_calls(state, window_id, phase)
    out: dict[str, dict[str, dict[int, list[float]]]] = {}
    for cid, c in state.candidates.items():
        for s in c.window_samples(window_id, phase):
            if s.instance != instance or (cid, s.case_id, s.block, s.instance) in marked:
                continue
            out.setdefault(cid, {}).setdefault(s.case_id, {}).setdefault(s.block, []).extend(
                s.samples_us
            )
    return out


def paired(
    reference: Mapping[str, Mapping[int, list[float]]],
    candidate: Mapping[str, Mapping[int, list[float]]],
) -> tuple[Blocks, Blocks]:
    """Both sides' blocks of every case, keeping the blocks each side has (paired by index)."""
    ref: Blocks = {}
    cand: Blocks = {}
    for case in candidate:
        common = sorted(set(reference.get(case, {})) & set(candidate[case]))
        if common:
            ref[case] = [reference[case][b] for b in common]
            cand[case] = [candidate[case][b] for b in common]
    return ref, cand


def _windows(cand: CandidateState, phase: Phase) -> list[str]:
    """The windows of the candidate's own evaluation, in order: its window, then its
    re-measurement's (not the later windows it was a reference in)."""
    own = (cand.candidate_id, remeasure_window(cand.candidate_id))
    return [w for w in own if cand.window_samples(w, phase)]


def _replicate_windows(fin: CandidateState) -> list[str]:
    """The windows of a finalist's revalidation, one per replicate, in order."""
    out: list[str] = []
    while fin.window_samples(w := replicate_window(fin.candidate_id, len(out)), Phase.REVALIDATION):
        out.append(w)
    return out


@dataclass(frozen=True)
class _Measurement:
    """One window's comparisons of one pair of instances: over the baseline, and over the
    incumbent when it was in it; and the blocks each rests on (reference, candidate)."""

    vs_baseline: Comparison
    vs_incumbent: Comparison | None
    baseline_blocks: stats.Pair
    incumbent_blocks: stats.Pair | None


def _incumbent_problems(state: RunState, cid: str, measurements: list[_Measurement]) -> list[str]:
    """Why the candidate does not beat the incumbent (criterion 6); [] when it does, or when
    the incumbent is the baseline."""
    incumbent = state.incumbent_id
    if incumbent is None or incumbent in (BASELINE_ID, cid):
        return []
    problems = []
    for m in measurements:
        vs = m.vs_incumbent
        if vs is not None:
            if vs.speedup <= 1.0 or vs.ci_low <= 1.0:
                problems.append(f"does not beat the incumbent {incumbent}: {_fmt(vs)} against it")
            continue
        decided = state.candidates[incumbent].decision
        bar = decided.speedup if decided is not None and decided.speedup else None
        if bar is not None and m.vs_baseline.ci_low <= bar:
            problems.append(
                f"does not beat the incumbent {incumbent}, promoted while it was measured: its CI "
                f"lower bound {m.vs_baseline.ci_low:.4f} over the baseline is not above "
                f"{incumbent}'s {bar:.4f}x"
            )
    return problems


def _measure(
    state: RunState,
    cand: CandidateState,
    window_id: str,
    instance: int,
    weights: Mapping[str, float],
    protected: Collection[str],
) -> _Measurement | DecisionMade:
    """One window's measurement of one instance of each member (window_blocks), or the decision
    it forces (a case lost to marked calls, a case that cannot be scored)."""
    cid = cand.candidate_id
    incumbent = state.incumbent_id
    members = window_blocks(state, window_id, Phase.ROUND, instance)
    base_b, cand_b = paired(members.get(BASELINE_ID, {}), members.get(cid, {}))
    lost = _lost_to_marks(state, cid, window_id, Phase.ROUND, cand_b)
    if lost:
        return DecisionMade(
            candidate_id=cid,
            outcome=Outcome.FAILED,
            reason=f"no benchmark call of case {lost[0]} ran on a quiet GPU beside the "
            "baseline (every one it had throttled or shared the GPU): not a measurement of "
            "its source",
            measured=False,
            notes=[n for n in [machine.marked_note(state, window_id, Phase.ROUND)] if n],
        )
    scored, problem = _scored(weights, protected, cand, members.get(cid, {}), base_b)
    if problem:
        return _failed(cid, problem)
    vs_inc, inc_pair = None, None
    if incumbent not in (None, BASELINE_ID, cid) and incumbent in members:
        inc_b, cand_i = paired(members[incumbent], members[cid])
        common = {c: wt for c, wt in scored.items() if c in inc_b}
        if common:
            vs_inc, inc_pair = compare_blocks(inc_b, cand_i, common), (inc_b, cand_i)
    return _Measurement(compare_blocks(base_b, cand_b, scored), vs_inc, (base_b, cand_b), inc_pair)


def instance_variance(
    state: RunState, candidate_id: str, weights: Mapping[str, float]
) -> stats.InstanceVariance:
    """How far instances of one source run apart (stats.instance_variance), from the controls a
    decision of the candidate may use: each member of a second window (remeasure_window) was
    measured there in several instances, its first build and its builds again, alternated; they
    are one control (the run's weights, over the cases and blocks every instance has). The second
    windows are the candidate's own and those of candidates of earlier rounds: the candidates of
    one round are decided on the same controls whether they were measured one after another or
    side by side on several devices (a parallel round's evaluations overlap)."""
    controls = []
    own_round = state.candidates[candidate_id].proposal.round
    for cid, c in state.candidates.items():
        wid = remeasure_window(cid)
        if not (cid == candidate_id or c.proposal.round < own_round):
            continue
        measured = _instances(c, wid)
        if len(measured) < 2:  # no second window, or one of new instances only (no control)
            continue
        by_instance = {i: window_blocks(state, wid, Phase.ROUND, i) for i in measured}
        for member in by_instance.get(2, {}):
            sides = aligned([b[member] for b in by_instance.values() if member in b])
            common = {case: w for case, w in weights.items() if case in sides[0]}
            if len(sides) > 1 and common:
                controls.append(stats.control(sides, common))
    return stats.instance_variance(controls)


def aligned(members: list[Mapping[str, Mapping[int, list[float]]]]) -> list[Blocks]:
    """Every member's blocks of the cases all of them have, keeping the blocks all of them have
    (paired by index, as paired() pairs two)."""
    out: list[Blocks] = [{} for _ in members]
    for case in set.intersection(*(set(m) for m in members)):
        common = sorted(set.intersection(*(set(m[case]) for m in members)))
        if common:
            for side, m in zip(out, members, strict=True):
                side[case] = [m[case][b] for b in common]
    return out


def _instances(cand: CandidateState, window_id: str) -> list[int]:
    """The instances of the candidate measured in its ROUND window, in order (1: the first
    builds); every member of the window was measured in the same ones. Read from the candidate's
    own samples: the baseline's hold every window of the run, and a decision reads this for each
    candidate's second window."""
    return sorted({s.instance for s in cand.window_samples(window_id, Phase.ROUND)})


def _combined(
    first: Comparison, pairs: list[list[stats.Pair]], instances: stats.InstanceVariance
) -> Comparison | None:
    """`first` (a comparison of one window) over every pair of instances (stats.instance_interval:
    their speedup and an interval that carries how far instances run apart), on the cases every
    window has; the cases' own numbers are `first`'s. None when no case is in every window."""
    common = {
        c.case_id: c.weight
        for c in first.cases
        if all(c.case_id in ref and c.case_id in cand for p in pairs for ref, cand in p)
    }
    if not common:
        return None
    point, low, high = stats.instance_interval(pairs, common, instances)
    return Comparison(point, low, high, first.cases, first.blocks)


def _over_instances(
    pairs: list[list[_Measurement]], instances: stats.InstanceVariance
) -> _Measurement:
    """The measurement of the first pair's first window, its comparisons taken over every pair of
    instances (_combined); against the incumbent only where every window had it."""
    first = pairs[0][0]
    if len(pairs) == 1 and len(pairs[0]) == 1 and instances.variance == 0:
        return first  # nothing to add to the window's own interval
    vs_base = _combined(
        first.vs_baseline, [[m.baseline_blocks for m in p] for p in pairs], instances
    )
    assert vs_base is not None  # every window scored the candidate's cases beside the baseline
    inc = [[m.incumbent_blocks for m in p if m.incumbent_blocks is not None] for p in pairs]
    vs_inc = None
    if first.vs_incumbent is not None and sum(map(len, inc)) == sum(map(len, pairs)):
        vs_inc = _combined(first.vs_incumbent, inc, instances)
    return _Measurement(vs_base, vs_inc, first.baseline_blocks, first.incumbent_blocks)


def _instance_notes(
    instances: stats.InstanceVariance, pairs: list[list[_Measurement]] | None
) -> list[str]:
    """What the interval carries of the instances: the run's estimate, and the pairs of instances
    a second window measured."""
    notes = []
    if instances.df:
        notes.append(
            f"instances: sigma_I {instances.sigma:.2%} between instances of one source, "
            f"{math.sqrt(instances.spread):.2%} with the windows' noise, carried in the interval "
            f"(df {instances.df}, from instances of one source measured in one window: its second "
            "window's and earlier rounds')"
        )
    if pairs is not None:
        each = ", ".join(f"{p[-1].vs_baseline.speedup:.4f}x" for p in pairs)
        notes.append(f"over {len(pairs)} pairs of instances of it and the baseline: {each}")
    return notes


def _decide_in_windows(
    state: RunState,
    cand: CandidateState,
    windows: list[str],
    thresholds: Thresholds,
    weights: Mapping[str, float],
    protected: Collection[str],
) -> DecisionMade:
    cid = cand.candidate_id
    measurements: list[_Measurement] = []
    for w in windows:
        m = _measure(state, cand, w, 1, weights, protected)
        if isinstance(m, DecisionMade):
            return m
        measurements.append(m)
    tripped = _tripwires(cand)
    if tripped and len(measurements) < 2:
        return _first_measurement_only(cand, tripped)
    instances = instance_variance(state, cid, weights)
    pairs: list[list[_Measurement]] | None = None
    replicate = None
    if len(measurements) > 1 and not tripped:
        # The second window a first window's promotion owes: new instances (2, 3, ...) beside the
        # first ones, each a pair of instances of its own; before events recorded instances, it
        # measured only new ones, and their pair is held to the replicate's rule.
        pairs = [measurements]
        for instance in _instances(cand, windows[1])[1:]:
            again = _measure(state, cand, windows[1], instance, weights, protected)
            if isinstance(again, DecisionMade):
                return again
            pairs.append([again])
        if len(pairs) == 1:
            pairs, replicate = [[m] for m in measurements], measurements[1]
        judged = [_over_instances(pairs, instances)]
    else:  # one window, or a tripwire's two (the same instances), each held to every criterion
        judged = [_over_instances([[m]], instances) for m in measurements]
    problems: list[str] = []
    notes: list[str] = []
    for i, m in enumerate(judged):
        label = f"measurement {i + 1}: " if len(judged) > 1 else ""
        found = measurement_problems(m.vs_baseline, thresholds, protected)
        problems += [label + x for x in found.problems]
        notes += [label + x for x in found.notes]
    problems += _incumbent_problems(state, cid, judged)
    if replicate is not None and not problems:
        problems += _replicate_problems(state, cid, replicate, thresholds)
    scored = {c.case_id: c.weight for c in measurements[0].vs_baseline.cases}
    problems += kernel.ncu_veto(state, cid, scored)
    reported = min((m.vs_baseline for m in judged), key=lambda c: c.speedup)
    latency = {c.case_id: c.candidate_median_us for c in measurements[0].vs_baseline.cases}
    machine_notes = [n for w in windows if (n := machine.marked_note(state, w, Phase.ROUND))]
    machine_notes += machine.host_notes(state, cid, latency)
    d = _verdict(
        state,
        cand,
        reported,
        problems,
        notes + _instance_notes(instances, pairs),
        tripped,
        machine_notes,
        again=None if pairs is None else pairs[-1][-1].vs_baseline.speedup,
        instances=instances,
        pairs=None if pairs is None else [p[-1].vs_baseline.speedup for p in pairs],
    )
    clear = None if len(windows) > 1 else clear_of_instances(state, d, thresholds)
    return d if clear is None else d.model_copy(update={"notes": [*d.notes, clear]})


def _replicate_problems(
    state: RunState, cid: str, m: _Measurement, thresholds: Thresholds
) -> list[str]:
    """Why a second window recorded before instances were (new instances of the candidate and
    its references only: no control) does not replicate the first window's promotion: its
    speedup over the baseline below min_speedup, or not above the incumbent it was measured
    beside, as those decisions were made (docs/GUARDS.md)."""
    problems = []
    if m.vs_baseline.speedup < thresholds.min_speedup:
        problems.append(
            f"measurement 2: speedup {_fmt(m.vs_baseline)} below min {thresholds.min_speedup:g} "
            "in a second window of new instances: the first window's gain did not replicate"
        )
    incumbent = state.incumbent_id
    if m.vs_incumbent is not None and m.vs_incumbent.speedup <= 1.0:
        problems.append(
            f"measurement 2: does not beat the incumbent {incumbent} in a second window of new "
            f"instances: {_fmt(m.vs_incumbent)} against it"
        )
    return problems


def _tripwires(cand: CandidateState) -> list:
    """The tripwire flags of a candidate (a second measurement is owed before any promotion)."""
    return [f for f in cand.flags if f.guard.startswith(TRIPWIRE_PREFIX)]


def _first_measurement_only(cand: CandidateState, tripped: list) -> DecisionMade:
    """A tripwire fired and no second measurement exists: rejected, never promoted on one."""
    return DecisionMade(
        candidate_id=cand.candidate_id,
        outcome=Outcome.REJECTED,
        reason=f"{tripped[0].guard} fired ({tripped[0].detail}) and there is no second "
        "measurement: never promoted on the first measurement alone",
        measured=full_measurement(cand),
    )


def _lost_to_marks(
    state: RunState, cid: str, window_id: str, phase: Phase, kept: Blocks
) -> list[str]:
    """The cases the candidate was benchmarked on in the window that have no block left beside
    the baseline because calls were marked (machine.marked_calls)."""
    marked = machine.marked_calls(state, window_id, phase)
    measured = {s.case_id for s in state.candidates[cid].window_samples(window_id, phase)}
    touched = {case for _, case, _, _ in marked}
    return sorted(c for c in measured if c in touched and c not in kept)


def _verdict(
    state: RunState,
    cand: CandidateState,
    reported: Comparison,
    problems: list[str],
    notes: list[str],
    tripped: list,
    machine_notes: list[str] | None = None,
    *,
    again: float | None = None,
    instances: stats.InstanceVariance | None = None,
    pairs: list[float] | None = None,
) -> DecisionMade:
    """`notes` (what qualified the measurement) and `machine_notes` (marked calls, host-bound
    cases) are both kept whatever the outcome; `again`: the speedup of the second window that
    replicated the first; `instances` and `pairs`: what the interval carried of instances (the
    run's estimate, each pair's speedup), recorded on the decision (None: a decision measured
    before windows, which carried none)."""
    incumbent = state.incumbent_id
    if problems:
        reason = "; ".join(problems)
    else:
        reason = (
            f"speedup {_fmt(reported)} over the baseline on {len(reported.cases)} case(s), "
            f"max CV {max(c.candidate_cv for c in reported.cases):.3f}"
            + (f", beats incumbent {incumbent}" if incumbent not in (None, BASELINE_ID) else "")
            + (f", held on re-measurement after {tripped[0].guard}" if tripped else "")
            + (f", held in a second window ({again:.4f}x)" if again is not None else "")
        )
    return DecisionMade(
        candidate_id=cand.candidate_id,
        outcome=Outcome.REJECTED if problems else Outcome.PROMOTED,
        reason=reason,
        speedup=reported.speedup,
        ci_low=reported.ci_low,
        ci_high=reported.ci_high,
        compared_to=incumbent,
        cases=reported.cases,
        measured=full_measurement(cand),
        notes=notes + (machine_notes or []),
        instance_df=None if instances is None else instances.df,
        instance_sigma=None if instances is None or not instances.df else instances.sigma,
        instance_pairs=pairs or [],
    )


def decide(
    state: RunState,
    candidate_id: str,
    thresholds: Thresholds,
    weights: Mapping[str, float],
    protected: Collection[str] | None = None,
) -> DecisionMade:
    """Promote, reject or fail one evaluated candidate (see the module doc for the criteria).
    `protected`: the protected case ids (default: every weighted case)."""
    protected = set(weights) if protected is None else set(protected)
    cand = state.candidates[candidate_id]
    gate = _gate(cand, protected, phase=None)
    if gate is not None:
        return gate.model_copy(update={"measured": full_measurement(cand)})
    if BASELINE_ID not in state.candidates:
        return _failed(candidate_id, "no baseline measurements in this run")
    windows = _windows(cand, Phase.ROUND)
    if windows:
        return _decide_in_windows(state, cand, windows, thresholds, weights, protected)
    return _decide_legacy(state, cand, thresholds, weights, protected)


def owes_second_window(
    state: RunState,
    candidate_id: str,
    thresholds: Thresholds,
    weights: Mapping[str, float],
    protected: Collection[str] | None = None,
) -> bool:
    """Whether the candidate's one window would promote it without being clear of the instances
    (clear_of_instances): then it is measured in a second window before it is decided
    (criterion 7)."""
    cand = state.candidates[candidate_id]
    if len(_windows(cand, Phase.ROUND)) != 1:
        return False
    d = decide(state, candidate_id, thresholds, weights, protected)
    return d.outcome == Outcome.PROMOTED and clear_of_instances(state, d, thresholds) is None


def clear_of_instances(state: RunState, d: DecisionMade, thresholds: Thresholds) -> str | None:
    """Why a promotion on one window is owed no second window, or None when it is owed one. A
    second window measures how far instances of one source run apart; once earlier rounds'
    second windows have measured it (CLEAR_MIN_DF degrees of freedom), a first window's interval
    carries it already. A promotion whose interval then lies CLEAR_MARGIN or more above every bar
    (min_speedup, and the incumbent's decided speedup), with no case noisier than max_cv, would
    need instances further apart than any measured (the H200's widest: 4% on a launch-bound
    case) to be noise. On the H200 a second window cost 19-42 s beside a first window's 6-12 s
    (softmax, benchmarks/results/h200_noise_2026-12-05/)."""
    if d.outcome != Outcome.PROMOTED or d.ci_low is None or (d.instance_df or 0) < CLEAR_MIN_DF:
        return None
    if any(
        c.candidate_cv > thresholds.max_cv or (c.baseline_cv or 0.0) > thresholds.max_cv
        for c in d.cases
    ):
        return None
    bar, what = thresholds.min_speedup, f"min_speedup {thresholds.min_speedup:g}"
    incumbent = state.incumbent_id
    decided = None if incumbent in (None, BASELINE_ID) else state.candidates[incumbent].decision
    if decided is not None and decided.speedup and decided.speedup > bar:
        bar, what = decided.speedup, f"the incumbent {incumbent}'s {decided.speedup:.4f}x"
    if d.ci_low < bar * (1.0 + CLEAR_MARGIN):
        return None
    return (
        f"decided on its first window: its CI lower bound {d.ci_low:.4f} lies "
        f"{d.ci_low / bar - 1.0:.0%} above {what} (at least {CLEAR_MARGIN:.0%}), its interval "
        f"carrying the run's instance estimate (df {d.instance_df}), no case over max CV "
        f"{thresholds.max_cv:g}: no second window owed"
    )


# ---- evidence measured before windows (window_id None) -----------------------------------------

_ANY_DEVICE = object()


def _by_block(
    cand: CandidateState, phase_filter: Callable[[Phase], bool], device: object = _ANY_DEVICE
) -> dict[int, dict[str, list[float]]]:
    """Samples per measurement block and case; only those measured on `device` when given."""
    blocks: dict[int, dict[str, list[float]]] = {}
    for s, on in zip(cand.samples, cand.sample_devices, strict=True):
        if phase_filter(s.phase) and (device is _ANY_DEVICE or on == device):
            blocks.setdefault(s.block, {}).setdefault(s.case_id, []).extend(s.samples_us)
    return blocks


def _legacy_incumbent_problems(
    state: RunState,
    candidate_id: str,
    scored: Mapping[str, float],
    all_samples: dict[str, list[float]],
    base_samples: dict[str, list[float]],
    device: str | None,
) -> list[str]:
    """Why the candidate does not beat the incumbent (measured directly against its samples,
    rescaled by the baselines when the incumbent ran on another device); [] when it does, or
    when there is no incumbent but the baseline."""
    incumbent = state.incumbent_id
    if incumbent is None or incumbent in (BASELINE_ID, candidate_id):
        return []
    not_reval = lambda p: p != Phase.REVALIDATION  # noqa: E731
    baseline = state.candidates[BASELINE_ID]
    inc = state.candidates[incumbent]
    inc_samples = _merge(_by_block(inc, not_reval))
    inc_device = _device(state, inc)
    note = ""
    if inc_device != device:
        inc_samples = _rescaled(
            inc_samples,
            _merge(_by_block(baseline, not_reval, inc_device)),
            base_samples,
        )
        note = f" (its times on device {inc_device} rescaled to device {device} by their baselines)"
    common = {c: w for c, w in scored.items() if inc_samples.get(c)}
    if not common:
        return []
    vs = compare({c: inc_samples[c] for c in common}, {c: all_samples[c] for c in common}, common)
    if vs.speedup <= 1.0 or vs.ci_low <= 1.0:
        return [f"does not beat the incumbent {incumbent}: {_fmt(vs)} against it{note}"]
    return []


def _decide_legacy(
    state: RunState,
    cand: CandidateState,
    thresholds: Thresholds,
    weights: Mapping[str, float],
    protected: Collection[str],
) -> DecisionMade:
    """A candidate measured alone (window_id None), against the baseline's validation samples
    (of its own device in a parallel run): how decisions were made before windows existed."""
    candidate_id = cand.candidate_id
    baseline = state.candidates[BASELINE_ID]
    not_reval = lambda p: p != Phase.REVALIDATION  # noqa: E731
    device = _device(state, cand)
    base_samples = _merge(_by_block(baseline, not_reval, device))
    blocks = _by_block(cand, not_reval)
    all_samples = _merge(blocks)
    scored, problem = _scored(weights, protected, cand, all_samples, base_samples)
    if problem:
        return _failed(candidate_id, problem)

    tripped = _tripwires(cand)
    if tripped and len(blocks) < 2:
        return _first_measurement_only(cand, tripped)
    # Each block on its own when a tripwire fired; otherwise all samples together.
    parts = [blocks[b] for b in sorted(blocks)] if tripped else [all_samples]
    comparisons = [
        compare({c: base_samples[c] for c in scored}, {c: p[c] for c in scored}, scored)
        for p in parts
        if all(p.get(c) for c in scored)
    ]
    if len(comparisons) != len(parts):
        return _failed(candidate_id, "a re-measurement block lacks samples for a scored case")
    worst = min(comparisons, key=lambda c: c.speedup)
    problems: list[str] = []
    notes: list[str] = []
    for i, comp in enumerate(comparisons):
        label = f"measurement {i + 1}: " if len(comparisons) > 1 else ""
        found = measurement_problems(comp, thresholds, protected)
        problems += [label + x for x in found.problems]
        notes += [label + x for x in found.notes]
    problems += _legacy_incumbent_problems(
        state, candidate_id, scored, all_samples, base_samples, device
    )
    problems += kernel.ncu_veto(state, candidate_id, scored)
    return _verdict(state, cand, worst, problems, notes, tripped)


def _device(state: RunState, cand: CandidateState) -> str | None:
    """The device a candidate was measured on: its evaluation's, else the run's own device
    (None in a run without --devices)."""
    return cand.device if cand.device is not None else state.primary_device


def _rescaled(
    samples: Mapping[str, list[float]],
    base_there: Mapping[str, list[float]],
    base_here: Mapping[str, list[float]],
) -> dict[str, list[float]]:
    """Samples measured on one device expressed on another: each case scaled by the ratio of the
    baseline's medians on the two devices (cases without both baselines are dropped)."""
    out = {}
    for case, values in samples.items():
        there, here = base_there.get(case), base_here.get(case)
        if there and here:
            factor = stats.median(here) / stats.median(there)
            out[case] = [v * factor for v in values]
    return out


def _merge(blocks: Mapping[int, Mapping[str, list[float]]]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for b in sorted(blocks):
        for case, s in blocks[b].items():
            out.setdefault(case, []).extend(s)
    return out


def decide_revalidation(
    state: RunState,
    finalist_id: str,
    baseline_id: str,
    thresholds: Thresholds,
    weights: Mapping[str, float],
    protected: Collection[str] | None = None,
) -> FinalistRevalidated:
    """Whether the finalist survives against the fresh baseline, from its revalidation windows
    only (REVALIDATION samples of its windows, one per replicate, their blocks pooled; before
    windows, every REVALIDATION sample, each side one block), and whether its replicates
    agree."""
    protected = set(weights) if protected is None else set(protected)
    fin = state.candidates[finalist_id]
    base = state.candidates[baseline_id]

    def result(
        survived: bool,
        reason: str,
        comp: Comparison | None = None,
        alternations: int = 0,
        notes: list[str] | None = None,
        replicates: list[float] | None = None,
    ) -> FinalistRevalidated:
        return FinalistRevalidated(
            candidate_id=finalist_id,
            survived=survived,
            reason=reason,
            speedup=None if comp is None else comp.speedup,
            ci_low=None if comp is None else comp.ci_low,
            ci_high=None if comp is None else comp.ci_high,
            alternations=alternations,
            cases=[] if comp is None else comp.cases,
            notes=notes or [],
            replicate_speedups=replicates or [],
        )

    reval = Phase.REVALIDATION
    blocking = [f for f in fin.flags if f.blocking]
    if blocking:
        return result(False, f"integrity guard {blocking[0].guard}: {blocking[0].detail}")
    for v in fin.verifications:
        if v.phase == reval and not v.passed and v.case_id in protected:
            return result(
                False, f"protected case {v.case_id} failed verification during revalidation"
            )
    replicas, machine_notes = _replicas(state, _replicate_windows(fin), finalist_id, baseline_id)
    base_b, fin_b, alternations = _revalidation_blocks(replicas, fin, base, weights)
    if alternations < 3:
        return result(
            False,
            f"only {alternations} interleaved alternation(s); at least 3 are needed",
            alternations=alternations,
        )
    failed = {v.case_id for v in fin.verifications if v.phase == reval and not v.passed}
    scored = {}
    for case_id, w in weights.items():
        if fin_b.get(case_id) and base_b.get(case_id) and case_id not in failed:
            scored[case_id] = w
        elif case_id in protected:
            return result(
                False,
                f"no revalidation samples for protected case {case_id}",
                alternations=alternations,
            )
    comp = compare_blocks(base_b, fin_b, scored)
    found = measurement_problems(comp, thresholds, protected)
    speedups = _replicate_speedups(replicas, scored)
    disagree = _replicate_problem(speedups, thresholds.replicate_tolerance)
    holds_in_each = bool(speedups) and min(speedups) >= thresholds.min_speedup
    problem = "; ".join(found.problems) or (
        disagree if disagree and (thresholds.strict_noise or not holds_in_each) else None
    )
    drift = _drift_notes(state, fin, base, comp)
    if problem:
        notes = found.notes + drift + machine_notes
        return result(False, problem, comp, alternations, notes, speedups)
    return result(
        True,
        f"speedup {_fmt(comp)} against a fresh baseline over {alternations} interleaved alternations",
        comp,
        alternations,
        found.notes + _replicate_notes(speedups, disagree, thresholds) + drift + machine_notes,
        speedups,
    )


def _drift_notes(
    state: RunState, fin: CandidateState, base: CandidateState, comp: Comparison
) -> list[str]:
    """A note where the finalist's revalidation and its decision disagree beyond both their
    intervals (their log speedups more than Z_99 standard errors of the difference apart): the
    machine's speed changed between them. It names the case whose baseline median moved most
    between the decision's window and the revalidation's, and the two measurements pooled, the
    one figure the store's views give this source (optimizer.decision.pooling)."""
    d, cid = fin.decision, fin.candidate_id
    if d is None or d.speedup is None:
        return []
    decided = pooling.Measurement(d.speedup, d.ci_low, d.ci_high)
    se_d, se_r = pooling.log_se(decided), pooling.log_se(comp)
    if se_d is None or se_r is None:
        return []
    z = abs(math.log(comp.speedup / d.speedup)) / math.hypot(se_d, se_r)
    if z <= pooling.Z_99:
        return []
    windows = (cid, remeasure_window(cid))
    before = _medians([s for w in windows for s in base.window_samples(w, Phase.ROUND)])
    after = _medians(
        [s for w in _replicate_windows(fin) for s in base.window_samples(w, Phase.REVALIDATION)]
    )
    moved = max(
        (c for c in before if c in after),
        key=lambda c: abs(math.log(after[c] / before[c])),
        default=None,
    )
    where = (
        f" (the baseline's median on case {moved} went {number(before[moved])} -> {number(after[moved])} us)"
        if moved is not None
        else ""
    )
    both = pooling.pool([decided, comp])
    assert both is not None and both.ci_low is not None and both.ci_high is not None
    return [
        f"this revalidation ({comp.speedup:.4f}x, {_confidence_pct()} CI {comp.ci_low:.4f}-"
        f"{comp.ci_high:.4f}) and {cid}'s decision ({d.speedup:.4f}x, CI "
        f"{d.ci_low:.4f}-{d.ci_high:.4f}) disagree beyond their intervals (z {z:.1f}): the "
        f"machine's speed changed between them{where}; pooled, the two read "
        f"{both.speedup:.4f}x (CI {both.ci_low:.4f}-{both.ci_high:.4f}), the figure `history` "
        "gives this source"
    ]


def _medians(samples: list[BenchmarkSampled]) -> dict[str, float]:
    by_case: dict[str, list[float]] = {}
    for s in samples:
        by_case.setdefault(s.case_id, []).extend(s.samples_us)
    return {c: stats.median(v) for c, v in by_case.items() if v}


def _replicate_notes(
    speedups: list[float], disagree: str | None, thresholds: Thresholds
) -> list[str]:
    """A surviving finalist's note on its replicates: they differ in size but each holds (the
    smallest is the one to quote), or they agree; none for a single replicate."""
    if disagree:
        return [
            f"{len(speedups)} replicates in fresh children differ in size: "
            f"{_speedups_text(speedups)}, above the bound of "
            f"{thresholds.replicate_tolerance:.2%}; each is above min {thresholds.min_speedup}, "
            f"so the win holds: its smallest, {min(speedups):.4f}x, is the one to quote"
        ]
    if len(speedups) > 1:
        return [f"{len(speedups)} replicates in fresh children agree: {_speedups_text(speedups)}"]
    return []


def _revalidation_blocks(
    replicas: list[tuple[Blocks, Blocks]],
    fin: CandidateState,
    base: CandidateState,
    weights: Mapping[str, float],
) -> tuple[Blocks, Blocks, int]:
    """The baseline's and the finalist's revalidation blocks per case, and the alternations
    they make: the replicates' windows pooled; before windows (no replicas), every
    REVALIDATION sample, each side one block, and the alternations both sides measured."""
    if replicas:
        base_b = {c: [b for r, _ in replicas for b in r.get(c, [])] for c in weights}
        fin_b = {c: [b for _, f in replicas for b in f.get(c, [])] for c in weights}
        return base_b, fin_b, max((len(b) for b in fin_b.values()), default=0)
    reval = Phase.REVALIDATION
    fin_blocks = _by_block(fin, lambda p: p == reval)
    base_blocks = _by_block(base, lambda p: p == reval)
    alternations = len(set(fin_blocks) & set(base_blocks))
    base_b = {c: [s] for c, s in _merge(base_blocks).items()}
    fin_b = {c: [s] for c, s in _merge(fin_blocks).items()}
    return base_b, fin_b, alternations


def _replicas(
    state: RunState, windows: list[str], finalist_id: str, baseline_id: str
) -> tuple[list[tuple[Blocks, Blocks]], list[str]]:
    """Each revalidation window's (baseline, finalist) blocks, paired within it (marked calls
    left out), and the notes on its marked calls."""
    reval = Phase.REVALIDATION
    replicas = []
    notes = []
    for i, wid in enumerate(windows):
        members = window_blocks(state, wid, reval)
        replicas.append(paired(members.get(baseline_id, {}), members.get(finalist_id, {})))
        note = machine.marked_note(state, wid, reval)
        if note:
            notes.append(f"replicate {i + 1}: {note}" if len(windows) > 1 else note)
    return replicas, notes


def _replicate_speedups(
    replicas: list[tuple[Blocks, Blocks]], scored: Mapping[str, float]
) -> list[float]:
    """Each replicate's speedup over the scored cases it has blocks of (a replicate with none,
    every call of it marked, is left out)."""
    out = []
    for base_b, fin_b in replicas:
        cases = {c: w for c, w in scored.items() if base_b.get(c) and fin_b.get(c)}
        if cases:
            out.append(stats.blocked_speedup(base_b, fin_b, cases))
    return out


def _speedups_text(speedups: list[float]) -> str:
    spread = max(speedups) / min(speedups) - 1.0
    return f"{', '.join(f'{x:.4f}x' for x in speedups)} (spread {spread:.2%})"


def _replicate_problem(speedups: list[float], tolerance: float) -> str | None:
    """Why the replicates do not agree (max / min - 1 above `tolerance`), or None."""
    if len(speedups) < 2 or max(speedups) / min(speedups) - 1.0 <= tolerance:
        return None
    return (
        f"its {len(speedups)} replicates in fresh children disagree: {_speedups_text(speedups)}, "
        f"above the bound of {tolerance:.2%} (--replicate-tolerance)"
    )
