"""The live log: one line per event of a run, and the timeline of `tlxdb show`.

Pure functions (a folded run in, text out). Kernel source text never appears in a live log line.
"""

from __future__ import annotations

from optimizer.decision import machine, stats
from optimizer.decision.policy import window_blocks
from optimizer.evaluation import window
from optimizer.reporting.result import case_numbers
from optimizer.units import number
from tlxstore.events import (
    BASELINE_ID,
    BenchmarkSampled,
    BuildFinished,
    BundleValidated,
    CandidateProposed,
    CaseVerified,
    CheckOutcome,
    CommitAttempted,
    DecisionMade,
    DeviceEvaluated,
    DevicesAssigned,
    DuplicateDetected,
    Envelope,
    Event,
    ExclusionRecorded,
    FinalistRevalidated,
    InfrastructureFailed,
    IntegrityFlagged,
    KnobsUnreadable,
    LaunchesObserved,
    MachineSampled,
    ModelExchanged,
    Phase,
    ProfileCollected,
    ProfilingFinished,
    RooflineAssessed,
    RunEnvironment,
    RunFinished,
    RunStarted,
    SearchEnded,
    ValidationCheck,
    is_remeasure_window,
    remeasure_window,
)
from tlxstore.fold import CandidateState, RunState
from tlxstore.limits import MAX_SAMPLES_PER_CASE


def ci_text(speedup: float | None, lo: float | None, hi: float | None) -> str:
    if speedup is None:
        return "n/a"
    ci = f" [{lo:.3f}, {hi:.3f}]" if lo is not None and hi is not None else ""
    return f"{speedup:.3f}x{ci}"


UNAVAILABLE = "unavailable on this target"


def one_line(text: str) -> str:
    return " ".join(text.split())


def warning_lines(checks: list[ValidationCheck]) -> list[str]:
    """One line per validation check that warned (and did not fail)."""
    return [f"warning: {c.name}: {c.detail}" for c in checks if c.outcome == CheckOutcome.WARN]


def _said_before(e: ProfileCollected | RooflineAssessed, state: RunState) -> bool:
    """Whether an earlier event of the run (in `state`) said what `e` says about the target.
    What cannot exist on a target (Proton on the CPU, a roofline without ceilings) is said once
    per run, not once per candidate."""
    for c in state.candidates.values():
        if isinstance(e, ProfileCollected):
            if any(p is not e and p.diagnostics == e.diagnostics for p in c.profiles):
                return True
        elif any(r is not e and _no_ceiling(r) for r in c.rooflines):
            return True
    return False


def _no_ceiling(e: RooflineAssessed) -> bool:
    return e.bandwidth_ceiling_bytes_per_s is None and e.compute_ceiling_flop_per_s is None


def _profile_line(e: ProfileCollected, state: RunState) -> str | None:
    if UNAVAILABLE in e.diagnostics:
        if _said_before(e, state):
            return None
        return (
            f"{e.candidate_id} WARNING: {one_line(e.diagnostics)} (profile {e.case_id}: null; "
            "the same for every candidate of this run, said once)"
        )
    base = state.candidates.get(BASELINE_ID)
    base_metrics = {
        m.name: m.value
        for p in (base.profiles if base else [])
        if p.case_id == e.case_id
        for m in p.metrics
    }
    parts = []
    for m in e.metrics[:4]:
        if m.value is None:
            parts.append(f"{m.name}=null")
            continue
        delta = ""
        b = base_metrics.get(m.name)
        if b and e.candidate_id != BASELINE_ID:
            delta = f" ({(m.value - b) / b:+.1%} vs baseline)"
        parts.append(f"{m.name}={m.value:.4g}{m.unit and ' ' + m.unit}{delta}")
    kernels = ", ".join(e.kernel_names) or "no kernel"
    return f"{e.candidate_id} profile {e.case_id}: time in {kernels}; " + "; ".join(parts)


def _fraction(achieved: float | None, ceiling: float | None, unit: str, scale: float) -> str:
    if achieved is None:
        return ""
    text = f"{achieved / scale:.3g} {unit}"
    if ceiling:
        text += f" = {achieved / ceiling:.0%} of {ceiling / scale:.3g}"
    return text


def _roofline_line(e: RooflineAssessed, state: RunState) -> str | None:
    if _no_ceiling(e) and e.bound == "unknown" and not e.disagreement:
        if _said_before(e, state):
            return None
        return (
            f"{e.candidate_id} roofline {e.case_id}: no bandwidth or compute ceiling is known for "
            "this device, so no bound is assessed (the same for every candidate of this run, "
            "said once)"
        )
    parts = [
        _fraction(e.achieved_bytes_per_s, e.bandwidth_ceiling_bytes_per_s, "TB/s", 1e12),
        _fraction(e.achieved_flop_per_s, e.compute_ceiling_flop_per_s, "TFLOP/s", 1e12),
    ]
    rates = "; ".join(p for p in parts if p) or "no bytes or flops known"
    line = (
        f"{e.candidate_id} roofline {e.case_id}: {number(e.time_us)} us ({e.time_source}), {rates}, "
        f"{e.bound}-bound"
    )
    if e.disagreement:
        line += f" | DISAGREEMENT: {e.disagreement}"
    return line


def describe(env: Envelope, state: RunState) -> str | None:
    """One readable line for an event of the live log, or None for events not worth a line."""
    if isinstance(env.event, _RUN_EVENTS):
        return _run_line(env, state)
    return _candidate_line(env.event, state)


_RUN_EVENTS = (
    RunStarted,
    RunEnvironment,
    BundleValidated,
    ModelExchanged,
    CommitAttempted,
    SearchEnded,
    RunFinished,
)


def _run_line(env: Envelope, state: RunState) -> str | None:
    """The line of an event about the whole run: start, validation, model, commit, end."""
    e = env.event
    match e:
        case RunStarted():
            t = e.thresholds
            return (
                f"run {env.run_id} on {e.device.kind}: provider {e.provider}{' / ' + e.model if e.model else ''}, "
                f"{t.max_rounds} rounds x {t.candidates_per_round}, min speedup {t.min_speedup}, max CV {t.max_cv}"
            )
        case BundleValidated():
            failed = [c for c in e.checks if not c.passed]
            if failed:
                return f"validation failed: {failed[0].name}: {failed[0].detail}"
            passed = "validation passed: " + "; ".join(
                f"{c.name} {c.outcome.value}" for c in e.checks
            )
            base = state.candidates.get(BASELINE_ID)
            numbers = [
                f"baseline {n.case_id}: median {n.median_us:.1f} us, p95 {n.p95_us:.1f} us, "
                f"CV {n.cv:.3f} ({n.samples} samples)"
                for n in (case_numbers(base, Phase.VALIDATION) if base else [])
            ]
            return "\n".join([*numbers, passed, *warning_lines(e.checks)])
        case CommitAttempted():
            if e.success:
                return f"committed {e.candidate_id} as {e.rev_after}: {e.subject}"
            return f"commit of {e.candidate_id} FAILED{' (conflict)' if e.conflict else ''}: {one_line(e.diagnostics)}"
        case ModelExchanged():
            tokens = f", {e.tokens_in}+{e.tokens_out} tokens" if e.tokens_in is not None else ""
            return (
                f"model exchange {e.exchange_id} ({e.model or e.provider}, {e.latency_ms:.0f} ms{tokens})"
                + (f": error {e.error}" if e.error else "")
            )
        case RunEnvironment():
            return environment_line(e)
        case SearchEnded():
            return f"search ended: {e.reason.value}{' — ' + one_line(e.detail) if e.detail else ''}"
        case RunFinished():
            win = f", winner {e.winner_id} at {e.speedup:.3f}x" if e.winner_id and e.speedup else ""
            return (
                f"run finished: {e.stopping_reason.value}{win}"
                f"{' — ' + one_line(e.detail) if e.detail else ''}{timing_label(state)}"
            )
    return None


def _more_samples_than_asked(e: BenchmarkSampled, state: RunState) -> str:
    """A warning when the harness returned more samples than the call asked for: tlxdb keeps
    the first max(asked, MAX_SAMPLES_PER_CASE) of them (optimizer/evaluation/child.py). A call
    of a window asks for window.per_call(repetitions); one measured alone, for all of them."""
    repetitions = state.started.thresholds.benchmark_repetitions if state.started else None
    if repetitions is None:
        return ""
    asked = window.samples_asked(e.window_id, repetitions)
    if len(e.samples_us) <= asked:
        return ""
    kept = max(asked, MAX_SAMPLES_PER_CASE)
    return (
        f" WARNING: the harness returned more samples than the {asked} asked; tlxdb keeps the "
        f"first {kept} at most"
    )


def _candidate_line(e: Event, state: RunState) -> str | None:
    """The line of an event about one candidate's evidence and decision."""
    match e:
        case CandidateProposed() if e.candidate_id != BASELINE_ID:
            return (
                f"{e.candidate_id} (round {e.round}, parent {e.parent_id}) hypothesis: {one_line(e.hypothesis)}"
                f"{' | evidence: ' + one_line(e.evidence) if e.evidence else ''} | change: {one_line(e.change) or 'n/a'}"
                f" | expected: {one_line(e.expected_effect) or 'n/a'} | risk: {one_line(e.risk) or 'n/a'}"
            )
        case DevicesAssigned():
            sim = " (simulated, for testing)" if e.simulated else ""
            return f"devices {', '.join(e.devices)}{sim}: one harness child per device"
        case DeviceEvaluated():
            took = (e.finished_at - e.started_at).total_seconds()
            return f"{e.candidate_id} evaluated on device {e.device} in {took:.1f} s"
        case DuplicateDetected():
            return f"{e.candidate_id} duplicate ({e.match} hash) of {e.duplicate_of_run}/{e.duplicate_of_candidate}"
        case BuildFinished():
            ok = "built" if e.success else f"build FAILED: {one_line(e.diagnostics)[-200:]}"
            return f"{e.candidate_id} {ok} in {e.duration_ms:.0f} ms"
        case CaseVerified():
            verdict = "correct" if e.passed else f"INCORRECT: {one_line(e.diagnostics)[-200:]}"
            return f"{e.candidate_id} verify {e.case_id} (attempt {e.attempt}): {verdict}"
        case BenchmarkSampled():
            return _sampled_line(e, state)
        case ProfileCollected():
            return _profile_line(e, state)
        case RooflineAssessed():
            return _roofline_line(e, state)
        case ProfilingFinished():
            level = f" ({e.level} set)" if e.level else ""
            return (
                f"{e.candidate_id} profiled by {e.tool}{level}, {e.cases} case(s): "
                f"{e.wall_ms / 1e3:.2f} s, {e.waited_ms / 1e3:.2f} s of it waited for"
            )
        case IntegrityFlagged():
            return f"{e.candidate_id} {'BLOCKED' if e.blocking else 'flagged'} by {e.guard}: {one_line(e.detail)}"
        case InfrastructureFailed():
            who = e.candidate_id or "provider"
            return f"{who} {e.kind.value} during {e.stage}: {one_line(e.diagnostics)[-200:]}"
        case DecisionMade():
            head = (
                f"{e.candidate_id} {e.outcome.value.upper()}: speedup {ci_text(e.speedup, e.ci_low, e.ci_high)}"
                f" — {one_line(e.reason)}"
            )
            return "\n".join([head, *_case_lines(e.cases), *(f"  note: {n}" for n in e.notes)])
        case KnobsUnreadable():
            return f"knobs tune cannot rewrite: {'; '.join(e.reasons)}"
        case LaunchesObserved():
            return None
        case MachineSampled():
            return _machine_line(e, state)
        case ExclusionRecorded():
            return f"{e.candidate_id} excluded: {e.signature} ({e.outcome.value})"
        case FinalistRevalidated():
            verdict = "survived" if e.survived else "did NOT survive"
            head = (
                f"{e.candidate_id} {verdict} final revalidation ({e.alternations} alternations): "
                f"speedup {ci_text(e.speedup, e.ci_low, e.ci_high)} — {one_line(e.reason)}"
            )
            return "\n".join([head, *(f"  note: {n}" for n in e.notes)])
    return None


def _sampled_line(e: BenchmarkSampled, state: RunState) -> str | None:
    """Samples measured alone get a line each. In a window (many short calls) only a block a
    noisy case got beyond the first ones is said, once, for the candidate the window is for
    (and, in its first block, a harness returning more samples than asked); its numbers are in
    the decision's lines."""
    if not e.samples_us:
        return None
    if e.window_id is None:
        block = f" block {e.block}" if e.phase == Phase.REVALIDATION else ""
        n = stats.summarize(e.samples_us)
        return (
            f"{e.candidate_id} bench {e.case_id}{block}: median {n.median_us:.1f} us, "
            f"p95 {n.p95_us:.1f} us, CV {n.cv:.3f} ({n.samples} samples)"
            f"{_more_samples_than_asked(e, state)}"
        )
    second = e.window_id == remeasure_window(e.candidate_id)
    if e.candidate_id != e.window_id and not second:
        return None
    window = state.candidates[e.candidate_id].window_samples(e.window_id, e.phase)
    if second and len(window) == 1:  # its first call
        return (
            f"{e.candidate_id} second window: it and its references built again (new "
            "instances) and measured beside the first ones before it is decided"
        )
    if e.block == 0 and (too_many := _more_samples_than_asked(e, state)):
        return f"{e.candidate_id} bench {e.case_id}:{too_many}"  # once a case and window
    if not e.extra:
        return None
    marked = machine.marked_calls(state, e.window_id, e.phase)
    # the case's samples so far of each member of the window (the candidate and its references),
    # marked calls left out: the case is noisy when any member's are (window.noisy_cases)
    so_far = {
        member: [x for block in cases[e.case_id].values() for x in block]
        for member, cases in window_blocks(state, e.window_id, e.phase, e.instance).items()
        if e.case_id in cases
    }
    noisiest = max(so_far, key=lambda m: stats.cv(so_far[m]), default=e.candidate_id)
    samples = so_far.get(noisiest, [])
    max_cv = state.started.thresholds.max_cv if state.started else None
    if marked and (max_cv is None or stats.cv(samples) <= max_cv):
        return (
            f"{e.candidate_id} {e.case_id} measured again, block {e.block}: a call of it ran "
            "while the GPU throttled or was shared"
        )
    whose = "" if noisiest == e.candidate_id else f"{noisiest}'s "
    return (
        f"{e.candidate_id} {e.case_id} is noisy ({whose}CV {stats.cv(samples):.3f} over "
        f"{len(samples)} samples): measured again, block {e.block}"
    )


def cpu_list(cpus: list[int]) -> str:
    """CPU numbers as ranges: [0, 1, 2, 3, 8] -> "0-3,8"."""
    ranges: list[list[int]] = []
    for cpu in sorted(cpus):
        if ranges and ranges[-1][1] == cpu - 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    return ",".join(f"{a}-{b}" if a != b else str(a) for a, b in ranges)


def environment_line(e: RunEnvironment) -> str:
    """The run's environment, one line; where NVML cannot be read, that it is unavailable (said
    once per run: nothing of the machine's state is recorded then)."""
    cpus = f"process CPUs {cpu_list(e.cpu_affinity)}" if e.cpu_affinity else "process CPUs unknown"
    host = f"{cpus}, CPU governor {e.cpu_governor or 'unknown'}"
    if e.unavailable:
        return (
            f"environment: {one_line(e.unavailable)}; no clocks, throttling, neighbours or host "
            f"cost are recorded in this run; {host}"
        )
    known = lambda v, unit="": "unknown" if v is None else f"{v:g}{unit}"  # noqa: E731
    persistence = {True: "on", False: "off", None: "unknown"}[e.persistence_mode]
    recorded = " (recorded trace, for testing)" if e.source == "recorded" else ""
    return (
        f"environment{recorded}: {e.gpu_name or 'GPU'} driver {e.driver_version or 'unknown'}, "
        f"persistence mode {persistence}, application clocks SM "
        f"{known(e.application_sm_clock_mhz)} / memory {known(e.application_mem_clock_mhz)} MHz, "
        f"power limit {known(e.power_limit_w, ' W')}, GPU on NUMA node "
        f"{known(e.gpu_numa_node)}, {host}"
    )


def _machine_line(e: MachineSampled, state: RunState) -> str | None:
    """The first marked call of a window, once (the candidate's decision counts them all)."""
    why = machine.marks(e)
    if not why or e.window_id is None:
        return None
    if len(machine.marked_calls(state, e.window_id, e.phase)) > 1:
        return None
    clock = f", SM clock down to {e.sm_clock_min_mhz:g} MHz" if e.sm_clock_min_mhz else ""
    where = " (final revalidation)" if e.phase == Phase.REVALIDATION else ""
    if is_remeasure_window(e.window_id):
        where = " (second window)"
    return (
        f"{e.window_id}{where}: a benchmark call ran while the GPU throttled or was shared "
        f"({e.candidate_id} case {e.case_id} block {e.block}: {'; '.join(why)}{clock}): left out "
        "of the decision and measured again (the decision's note counts them all)"
    )


def _case_lines(cases: list) -> list[str]:
    """One line per case of a decision: the two medians side by side, their CVs and counts."""
    out = []
    for c in cases:
        counts = (
            f", {c.candidate_samples} / {c.baseline_samples} samples"
            if c.candidate_samples is not None
            else ""
        )
        out.append(
            f"  {c.case_id}: {c.candidate_median_us:.1f} us vs {c.baseline_median_us:.1f} us baseline "
            f"({c.speedup:.3f}x), CV {c.candidate_cv:.3f} / "
            f"{'n/a' if c.baseline_cv is None else format(c.baseline_cv, '.3f')}{counts}"
        )
    return out


def timing_label(state: RunState) -> str:
    """CPU timings are the Triton interpreter's: say so wherever a speedup is reported."""
    device = state.started.device if state.started else None
    if device is not None and device.backend == "cpu":
        return " (timings measure the Triton interpreter on the CPU, not a GPU)"
    return ""


def timeline(envelopes: list[Envelope]) -> list[str]:
    """Every event worth a line, in order, as `tlxdb show` prints it."""
    state = RunState()
    lines = []
    for env in envelopes:
        state.apply(env)
        line = describe(env, state)
        if line is not None:
            lines.append(f"{env.seq:>5}  {env.recorded_at:%H:%M:%S}  {line}")
    return lines


# ---- the report -----------------------------------------------------------------------------


def candidate_numbers(c: CandidateState) -> str:
    """median/p95/CV per case of one candidate, one line (for `tlxdb show`)."""
    return "; ".join(
        f"{n.case_id} {n.median_us:.1f}/{n.p95_us:.1f} us CV {n.cv:.3f}"
        for n in case_numbers(c, None)
    )
