"""Validation before any optimization (docs/VALIDATION.md): the bundle run through the evaluator
(the device it runs on: optimizer/bundle/device.py).

Invariants:
- Each check passes, warns or fails. A check fails only where it proves the bundle cannot
  protect the user; one that cannot prove it warns (--strict-validation makes warnings failures).
- Fails: the harness does not import or lacks build/verify/benchmark; no case is protected; the
  untouched kernel (candidate "baseline") does not build; a protected case fails verify; samples
  are not positive finite numbers; build() hands a second, different source the first one's
  artifact in one child (a fixed module name); build() accepts a source with a syntax error;
  verify() accepts a kernel whose functions and kernels were made to compute NaN in Python
  (which runs on any target), whether or not it called them; verify() accepts a kernel whose
  `*.store` values are perturbed when a kernel holding such a store was observed to launch
  during that verification.
- Warns: the harness's profile attributes time to no kernel (or raises); samples are constant
  (synthetic timing) or noisier than --max-cv; verify() accepts the perturbed stores but no
  kernel holding one launched (a host path: that code does not run on this target); a probe
  that could not be run.
- The baseline's evidence is emitted as ordinary events; the probes (sources tlxdb writes itself,
  so not put through the candidates' static checks) are summarized in the checks only.
- Nothing here mutates os.environ; the target's environment reaches child processes only.
"""

from __future__ import annotations

import ast
import tempfile
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

from optimizer import pysource
from optimizer.bundle.loading import FrozenBundle
from optimizer.bundle.spec import CaseSpec
from optimizer.decision import kernel, stats
from optimizer.evaluation import attribution, window
from optimizer.evaluation.child import SAME_ARTIFACT
from optimizer.evaluation.evaluator import Evaluator
from optimizer.evaluation.requests import EvalRequest, EvalSummary
from optimizer.units import number
from tlxstore.errors import ConfigError
from tlxstore.events import (
    BASELINE_ID,
    BuildFinished,
    CaseVerified,
    Event,
    FailureKind,
    LaunchesObserved,
    Phase,
    ProfileCollected,
    Thresholds,
    ValidationCheck,
)
from tlxstore.fold import CandidateState

UNBUILDABLE_SUFFIX = "\n\n)  # tlxdb negative test: this source must not build\n"
SECOND_BUILD_SUFFIX = "\n\n# tlxdb validation: the same kernel as another source, built second\n"
MUTANT_OFFSET = 1.0


class ValidationFailedError(ConfigError):
    """The bundle failed validation; it cannot protect the optimization."""


# ---- the wrong-answer mutant ----------------------------------------------------------------


class _PerturbStores(ast.NodeTransformer):
    def __init__(self) -> None:
        self.count = 0
        self.functions: set[str] = set()  # the functions holding a perturbed store
        self._within: list[str] = []

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        self._within.append(node.name)
        self.generic_visit(node)
        self._within.pop()
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if not (isinstance(node.func, ast.Attribute) and node.func.attr == "store"):
            return node
        offset = ast.Constant(MUTANT_OFFSET)
        value = next((kw for kw in node.keywords if kw.arg == "value"), None)
        if value is not None:
            value.value = ast.BinOp(value.value, ast.Add(), offset)
        elif len(node.args) >= 2:
            node.args[1] = ast.BinOp(node.args[1], ast.Add(), offset)
        else:
            return node
        self.count += 1
        self.functions.update(self._within[-1:])
        return node


class WrongAnswerMutant(BaseModel):
    """The kernel with every stored value shifted by MUTANT_OFFSET, and the functions that run a
    shifted store: those holding one and, transitively, those calling one by name (a kernel
    whose `@triton.jit` helper stores). A launch of one of them runs a perturbed store."""

    source: str
    kernels: frozenset[str]


def _callers(tree: ast.Module, functions: set[str]) -> frozenset[str]:
    """`functions` and every function of the module that calls one of them by name, transitively."""
    calls = {
        fn.name: {
            c.func.id
            for c in ast.walk(fn)
            if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
        }
        for fn in ast.walk(tree)
        if isinstance(fn, ast.FunctionDef)
    }
    reach = set(functions)
    while new := {name for name, called in calls.items() if called & reach} - reach:
        reach |= new
    return frozenset(reach)


def wrong_answer_mutant(source: str) -> WrongAnswerMutant | None:
    """The wrong-answer mutant of `source`, or None when it stores nothing."""
    tree = pysource.parse(source)
    rewriter = _PerturbStores()
    tree = rewriter.visit(tree)
    if rewriter.count == 0:
        return None
    return WrongAnswerMutant(
        source=ast.unparse(ast.fix_missing_locations(tree)),
        kernels=_callers(tree, rewriter.functions),
    )


def unbuildable_source(source: str) -> str:
    return source + UNBUILDABLE_SUFFIX


# ---- the wrong-output mutant ----------------------------------------------------------------

_SPOILER = """

# tlxdb negative test: everything this module defines that computes returns NaN (in Python, so on
# any target): functions and methods spoil their results, or their tensor arguments when they
# return nothing; kernels launched as kernel[grid](...) spoil their tensor arguments.
def _tlxdb_mark():
    with open({marker!r}, "a") as f:
        f.write("spoiled\\n")


def _tlxdb_is_array(value):
    return hasattr(value, "shape") and hasattr(value, "dtype")


def _tlxdb_spoil(value):
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_tlxdb_spoil(v) for v in value)
    if isinstance(value, dict):
        return {{k: _tlxdb_spoil(v) for k, v in value.items()}}
    if isinstance(value, float) or _tlxdb_is_array(value):
        _tlxdb_mark()
        return value * float("nan")
    return value


def _tlxdb_spoil_in_place(values):
    for a in values:
        if not _tlxdb_is_array(a):
            continue
        for fill in ("fill_", "fill"):
            try:
                getattr(a, fill)(float("nan"))
            except Exception:
                continue
            _tlxdb_mark()
            break


def _tlxdb_function(fn):
    def spoiled(*args, **kwargs):
        result = fn(*args, **kwargs)
        if result is None:
            _tlxdb_spoil_in_place([*args, *kwargs.values()])
            return result
        return _tlxdb_spoil(result)

    spoiled.__name__ = getattr(fn, "__name__", "spoiled")
    spoiled.__doc__ = getattr(fn, "__doc__", None)
    return spoiled


# A kernel stays the object Triton made (a @triton.jit helper another kernel calls must still
# be one when that kernel compiles); only its class becomes a subclass whose launch,
# kernel[grid](...), spoils the launch's tensor arguments.
def _tlxdb_kernel_class(base):
    class Spoiled(base):
        def __getitem__(self, grid):
            launch = super().__getitem__(grid)

            def spoiled(*args, **kwargs):
                result = launch(*args, **kwargs)
                _tlxdb_spoil_in_place([*args, *kwargs.values()])
                return result

            return spoiled

    Spoiled.__name__, Spoiled.__qualname__ = base.__name__, base.__qualname__
    return Spoiled


def _tlxdb_spoil_module(names):
    for name, value in names.items():
        if name.startswith("_tlxdb"):
            continue
        if isinstance(value, type) and value.__module__ == __name__:
            for method in ("forward", "__call__"):
                if method in vars(value):
                    setattr(value, method, _tlxdb_function(vars(value)[method]))
        elif hasattr(value, "__getitem__") and type(value).__module__.startswith("triton"):
            value.__class__ = _tlxdb_kernel_class(type(value))
        elif callable(value) and getattr(value, "__module__", None) == __name__:
            names[name] = _tlxdb_function(value)


_tlxdb_spoil_module(globals())
"""


def wrong_output_mutant(source: str, marker: Path) -> str:
    """The kernel with every function, method and kernel it defines spoiled to compute NaN,
    writing to `marker` each time it spoils something. The spoiling is Python, so it runs on any
    target (a host path included)."""
    return source + _SPOILER.format(marker=str(marker))


# ---- the checks -----------------------------------------------------------------------------


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _passed(name: str, detail: str) -> ValidationCheck:
    return ValidationCheck(name=name, passed=True, detail=detail)


def _warned(name: str, detail: str) -> ValidationCheck:
    return ValidationCheck(name=name, passed=True, warning=True, detail=detail)


# Errors a harness meets for a known reason it does not say, and that reason (a substring of the
# error, what to add to the failure).
KNOWN_CAUSES = {
    "0 active drivers": (
        "Triton found no GPU driver: what asks Triton for the GPU needs one (a device query such "
        "as driver.active.utils.get_device_properties, a kernel's .warmup(), CUDA graphs); on "
        "the interpreter (TRITON_INTERPRET=1) take device numbers (the SM count) from a constant "
        "(tlxdb times triton.testing.do_bench and @triton.autotune lists on the CPU clock there: "
        "docs/MEASUREMENTS.md)"
    ),
}


def _failed(name: str, detail: str) -> ValidationCheck:
    """A failed check; `detail` with the cause when it is an error of a known cause."""
    causes = [cause for error, cause in KNOWN_CAUSES.items() if error in detail]
    return ValidationCheck(name=name, passed=False, detail="; ".join([detail, *causes]))


def protected_check(cases: list[CaseSpec]) -> ValidationCheck:
    """A bundle without a protected case cannot disqualify a wrong candidate at all."""
    if any(c.protected for c in cases):
        n = sum(c.protected for c in cases)
        return _passed("cases:protected", f"{n} of {len(cases)} cases protected")
    return _failed(
        "cases:protected",
        'no protected case: cases.json marks every case "protected": false, so no wrong answer '
        "could disqualify a candidate; mark at least one case protected",
    )


def _unloaded_check(baseline: CandidateState, summary: EvalSummary) -> ValidationCheck:
    """The check that failed when the baseline never built (the harness did not load, or the
    child died before building)."""
    f = baseline.failures[-1] if baseline.failures else None
    if f is not None and f.kind == FailureKind.HARNESS_ERROR:
        return _failed("harness", _last_line(f.diagnostics))
    detail = f"{f.kind.value}: {_last_line(f.diagnostics)}" if f else summary.reason
    return _failed("baseline:evaluate", detail)


def _verify_check(
    baseline: CandidateState, summary: EvalSummary, protected: set[str]
) -> ValidationCheck:
    failed = [v for v in baseline.verifications if not v.passed and v.case_id in protected]
    if failed:
        return _failed(
            "baseline:verify",
            f"protected case {failed[0].case_id} failed verification: "
            f"{_last_line(failed[0].diagnostics)}",
        )
    if not baseline.verifications:
        return _failed("baseline:verify", summary.reason)
    return _passed("baseline:verify", "every protected case verifies")


def _samples_check(
    baseline: CandidateState, summary: EvalSummary, thresholds: Thresholds
) -> ValidationCheck:
    if not summary.benchmarked:
        return _failed("baseline:samples", summary.reason or "the baseline was not benchmarked")
    by_case = baseline.samples_by_case(Phase.VALIDATION)
    constant = [c for c, s in by_case.items() if len(s) > 1 and stats.cv(s) == 0]
    if constant and len(constant) == len(by_case):
        return _warned(
            "baseline:samples",
            "constant samples (CV 0) in every case: the harness reports synthetic timing, not a "
            "measurement; speedups will be whatever it reports",
        )
    noisy = [
        f"case {case_id} has CV {stats.cv(s):.3f} > --max-cv {thresholds.max_cv} over "
        f"{len(s)} samples ({kernel.noise_cause(baseline, case_id)})"
        for case_id, s in by_case.items()
        if stats.cv(s) > thresholds.max_cv
    ]
    if noisy:
        consequence = (
            "no candidate can be promoted on a case this noisy (--strict-noise)"
            if thresholds.strict_noise
            else "a candidate is promoted only when its whole interval lies above "
            "--min-speedup, with a note naming the case (--strict-noise refuses it)"
        )
        return _warned("baseline:samples", "; ".join(noisy) + ": " + consequence)
    return _passed("baseline:samples", "positive and repeatable")


UNITS_FACTOR = 100.0
"""A benchmark median this many times shorter than the kernels' own run time is not in
microseconds. The kernels' time is the wall time of their launches observed while a case was
verified, the kernels compiled (LaunchesObserved attempt 2 on; on a GPU each launch is
synchronized, so a kernel of a few microseconds reads 10-30 us: far under 100x); milliseconds
read as microseconds are 1000x short."""


def _shape_check(baseline: CandidateState, thresholds: Thresholds) -> ValidationCheck | None:
    """A warning when the baseline's samples cannot be timings of one call each in microseconds:
    a call returned more samples than it was asked for (a do_bench quantiles tuple, a list of
    percentiles), or a case's median is UNITS_FACTOR times shorter than its kernels' own run
    time (milliseconds). None when neither shows."""
    repetitions = thresholds.benchmark_repetitions
    problems = []
    calls = [s for s in baseline.samples if s.phase == Phase.VALIDATION]
    for over in calls:
        asked = window.samples_asked(over.window_id, repetitions)
        if len(over.samples_us) <= asked:
            continue
        problems.append(
            f"benchmark(artifact, case, {asked}) returned {len(over.samples_us)} samples on case "
            f"{over.case_id}: each sample must be the time of one call in microseconds, not "
            "quantiles or percentiles (do_bench(..., quantiles=...) returns those); tlxdb "
            "treats them as samples"
        )
        break
    medians = {c: stats.median(s) for c, s in baseline.samples_by_case(Phase.VALIDATION).items()}
    for launched in baseline.launches:
        run_us = sum(k.total_us for k in launched.launches)
        median = medians.get(launched.case_id)
        if launched.attempt < 2 or not median or median * UNITS_FACTOR >= run_us:
            continue
        problems.append(
            f"case {launched.case_id}: its samples (median {number(median)} us) are "
            f"{run_us / median:.0f}x shorter than its kernels' own run time while it was "
            f"verified ({number(run_us)} us): benchmark() must return microseconds "
            "(triton.testing.do_bench returns milliseconds: multiply by 1000)"
        )
        break
    if not problems:
        return None
    return _warned("baseline:units", "; ".join(problems))


def baseline_checks(
    baseline: CandidateState, summary: EvalSummary, thresholds: Thresholds, protected: set[str]
) -> list[ValidationCheck]:
    """Checks on the untouched kernel's evidence."""
    if baseline.build is None:
        return [_unloaded_check(baseline, summary)]
    checks = [_passed("harness", "imports; has build, verify and benchmark")]
    if not summary.built:
        return [*checks, _failed("baseline:build", _last_line(baseline.build.diagnostics))]
    checks += [_passed("baseline:build", ""), _verify_check(baseline, summary, protected)]
    checks.append(_samples_check(baseline, summary, thresholds))
    if summary.benchmarked and (shape := _shape_check(baseline, thresholds)) is not None:
        checks.append(shape)
    if summary.benchmarked:
        own = [p for p in baseline.profiles if attribution.is_attribution(p)]
        if own:
            checks.append(_attribution_check(own))
        checks.append(_profile_check([p for p in baseline.profiles if p not in own]))
    return checks


def _attribution_check(profiles: list[ProfileCollected]) -> ValidationCheck:
    """tlxdb's own launch attribution of the baseline. Where Proton cannot run on this target
    that is a fact of the machine, not of the bundle (a pass that says so); where it ran and
    found no kernel of the candidate's, a warning (never a failure: candidates are measured)."""
    mains = sorted({k for p in profiles if (k := attribution.main_kernel_of(p))})
    if mains:
        return _passed("baseline:attribution", f"main kernel {', '.join(mains)}")
    reasons = [_last_line(p.diagnostics) for p in profiles if p.diagnostics]
    reason = reasons[0] if reasons else "no kernel was attributed"
    if all(attribution.was_unavailable(p) for p in profiles):
        return _passed("baseline:attribution", f"not collected: {reason}")
    return _warned("baseline:attribution", reason)


def _profile_check(profiles: list[ProfileCollected]) -> ValidationCheck:
    """A profile is never fatal: one without kernel attribution only warns (tlxdb's own
    profiling attributes time where it can)."""
    if not profiles:
        return _passed("baseline:profile", "the harness has no profile()")
    attributed = [p for p in profiles if p.kernel_names]
    if attributed:
        names = sorted({n for p in attributed for n in p.kernel_names})
        return _passed("baseline:profile", f"time attributed to {', '.join(names)}")
    diag = _last_line(profiles[0].diagnostics)
    return _warned(
        "baseline:profile",
        f"the harness's profile attributes time to no kernel{': ' + diag if diag else ''}; "
        "candidates are compared on end-to-end latency where tlxdb cannot profile them itself",
    )


class _Probe(BaseModel):
    """What a probe showed: whether the source built, whether verify() accepted it (every
    verification of a protected case passed; the rest of its evaluation does not matter) and
    the kernels observed to launch while it verified the protected cases."""

    built: bool
    accepted: bool
    launched: frozenset[str] = frozenset()
    why_not_built: str = ""  # the last line of the build's diagnostics, when it did not build


def _probe(evaluator: Evaluator, candidate_id: str, source: str, timeout_s: float) -> _Probe:
    """Evaluate a source tlxdb wrote itself (so not through the candidates' static checks);
    its evidence is summarized in a check, not recorded as a candidate."""
    sink: list[Event] = []
    summary = evaluator.for_probes().evaluate(
        EvalRequest(
            candidate_id=candidate_id,
            source=source,
            phase=Phase.VALIDATION,
            repetitions=1,
            timeout_s=timeout_s,
            verify_repeats=1,
            profile=False,
        ),
        sink.append,
    )
    protected = {c.case_id for c in evaluator.bundle.cases if c.protected}
    verdicts = [e.passed for e in sink if isinstance(e, CaseVerified) and e.case_id in protected]
    launched = frozenset(
        launch.kernel
        for e in sink
        if isinstance(e, LaunchesObserved) and e.case_id in protected
        for launch in e.launches
    )
    failed = [e.diagnostics for e in sink if isinstance(e, BuildFinished) and not e.success]
    return _Probe(
        built=summary.built,
        accepted=bool(verdicts) and all(verdicts),
        launched=launched,
        why_not_built=_last_line(failed[-1]) if failed else "",
    )


def _inconclusive(name: str, mutant: str, probe: _Probe) -> ValidationCheck:
    """A negative check whose mutant did not build: a warning saying why, where the build did."""
    why = f" ({probe.why_not_built})" if probe.why_not_built else ""
    return _warned(name, f"inconclusive: the kernel with {mutant} did not build{why}")


def _unbuildable_check(evaluator: Evaluator, source: str, timeout_s: float) -> ValidationCheck:
    if not _probe(evaluator, "negative-unbuildable", unbuildable_source(source), timeout_s).built:
        return _passed("negative:unbuildable", "build() refused a source with a syntax error")
    return _failed(
        "negative:unbuildable",
        "build() accepted a source with a syntax error: it cannot tell a broken kernel",
    )


def _wrong_output_check(evaluator: Evaluator, source: str, timeout_s: float) -> ValidationCheck:
    name = "negative:wrong_output"
    with tempfile.TemporaryDirectory(prefix="tlxdb-probe-") as d:
        marker = Path(d) / "spoiled"
        wrong = _probe(
            evaluator, "negative-wrong-output", wrong_output_mutant(source, marker), timeout_s
        )
        spoiled = marker.exists()
    if not wrong.built:
        return _inconclusive(name, "spoiled results", wrong)
    if not wrong.accepted:
        return _passed(name, "verify() refused a kernel whose results are NaN")
    how = "" if spoiled else " (the kernel's code never ran)"
    return _failed(
        name, f"verify() accepted a kernel whose results are NaN{how}: it can pass a wrong kernel"
    )


def _wrong_answer_check(evaluator: Evaluator, source: str, timeout_s: float) -> ValidationCheck:
    name = "negative:wrong_answer"
    mutant = wrong_answer_mutant(source)
    if mutant is None:
        return _passed(name, "not run: the kernel has no store call to perturb")
    wrong = _probe(evaluator, "negative-wrong-answer", mutant.source, timeout_s)
    if not wrong.built:
        return _inconclusive(name, "perturbed stores", wrong)
    if not wrong.accepted:
        return _passed(name, "verify() refused a kernel whose stored values are off by 1.0")
    ran = sorted(wrong.launched & mutant.kernels)
    if ran:
        return _failed(
            name,
            f"verify() accepted a kernel whose stored values are off by 1.0, and the perturbed "
            f"kernel ({', '.join(ran)}) was observed to launch: it can pass a wrong kernel",
        )
    return _warned(
        name,
        "verify() accepted a kernel whose stored values are off by 1.0, but no kernel with a "
        "perturbed store was observed to launch (a host path on this target): inconclusive",
    )


def fresh_build_check(evaluator: Evaluator, source: str, timeout_s: float) -> ValidationCheck:
    """Every candidate is built in one child with the incumbent it is measured against: a
    harness whose build() gives a second, different source the first one's artifact (it imports
    the kernel under a fixed module name, and Python hands back the cached module) measures
    each candidate against itself. Shown here, before a run, with the kernel and the same kernel
    plus a comment, built one after the other in one child."""
    name = "harness:fresh_build"
    summary = evaluator.for_probes().build_apart(
        "probe-second-build", source, source + SECOND_BUILD_SUFFIX, timeout_s, lambda _: None
    )
    if summary.reason == SAME_ARTIFACT:
        return _failed(name, f"{SAME_ARTIFACT}: every candidate would be measured against itself")
    if not summary.built:
        return _warned(name, f"inconclusive: the second build did not finish ({summary.reason})")
    return _passed(name, "build() gave two different sources two artifacts in one child")


def negative_checks(evaluator: Evaluator, source: str, timeout_s: float) -> list[ValidationCheck]:
    """The trust-boundary tests: an unbuildable source, a kernel whose results are NaN (in
    Python) and one whose stored values are off (in the kernel) must be refused."""
    return [
        _unbuildable_check(evaluator, source, timeout_s),
        _wrong_output_check(evaluator, source, timeout_s),
        _wrong_answer_check(evaluator, source, timeout_s),
    ]


def strictly(checks: list[ValidationCheck]) -> list[ValidationCheck]:
    """--strict-validation: every warning becomes a failure (a CI pipeline of bundles)."""
    return [
        c.model_copy(update={"passed": False, "detail": f"{c.detail} (--strict-validation)"})
        if c.warning
        else c
        for c in checks
    ]


def validate(
    evaluator: Evaluator,
    frozen: FrozenBundle,
    source: str,
    thresholds: Thresholds,
    baseline: Callable[[], CandidateState],
    emit: Callable[[Event], None],
    artifacts_dir: Path | None = None,
    *,
    strict: bool = False,
) -> list[ValidationCheck]:
    """Run every check. The baseline's evidence goes to `emit` (the candidate "baseline" must
    already be proposed); `baseline()` returns its state as folded so far."""
    frozen.check()
    protected = protected_check(frozen.bundle.cases)
    if not protected.passed:
        return [protected]
    summary = evaluator.evaluate(
        EvalRequest(
            candidate_id=BASELINE_ID,
            source=source,
            phase=Phase.VALIDATION,
            repetitions=thresholds.benchmark_repetitions,
            timeout_s=thresholds.max_candidate_seconds,
            artifacts_dir=artifacts_dir,
            max_cv=thresholds.max_cv,
            max_extra_blocks=thresholds.max_extra_blocks,
        ),
        emit,
    )
    names = {c.case_id for c in frozen.bundle.cases if c.protected}
    checks = [protected, *baseline_checks(baseline(), summary, thresholds, names)]
    if all(c.passed for c in checks):
        checks.append(fresh_build_check(evaluator, source, thresholds.max_candidate_seconds))
    if all(c.passed for c in checks):
        checks += negative_checks(evaluator, source, thresholds.max_candidate_seconds)
    frozen.check()
    return strictly(checks) if strict else checks


def failure_message(checks: list[ValidationCheck]) -> str:
    """One line naming the first failed check."""
    first = next(c for c in checks if not c.passed)
    return f"bundle validation failed ({first.name}): {first.detail}"
