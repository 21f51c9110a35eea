"""Validation before any optimization (docs/CONTRACT.md §1), and the device the run measures on.

Invariants:
- The untouched kernel (candidate "baseline") builds, every protected case verifies, every
  case's samples are positive and repeatable (CV <= max_cv), and a profile, when the harness has
  one, attributes time to a kernel. Its evidence is emitted as ordinary events.
- The trust boundary is tested with two sources tlxdb makes itself: one that cannot build (a
  syntax error appended) and one that builds but computes the wrong answer (every value a
  `*.store(ptr, value, ...)` call writes is perturbed by an AST rewrite). A bundle whose harness
  accepts either is refused. Their evidence is summarized in the checks, not appended as
  candidates.
- Nothing here mutates os.environ; the target's environment reaches child processes only.
"""

from __future__ import annotations

import ast
import json
import platform
import subprocess
from collections.abc import Callable
from pathlib import Path

from optimizer.bundle.loading import FrozenBundle
from optimizer.decision import stats
from optimizer.evaluation import attribution
from optimizer.evaluation.evaluator import Evaluator
from optimizer.evaluation.requests import EvalRequest, EvalSummary
from tlxstore.errors import ConfigError
from tlxstore.events import (
    BASELINE_ID,
    DeviceInfo,
    Event,
    FailureKind,
    Phase,
    ProfileCollected,
    Thresholds,
    ValidationCheck,
)
from tlxstore.fold import CandidateState

UNBUILDABLE_SUFFIX = "\n\n)  # tlxdb negative test: this source must not build\n"
MUTANT_OFFSET = 1.0


class ValidationFailedError(ConfigError):
    """The bundle failed validation; it cannot protect the optimization."""


class ArchMismatchError(ConfigError):
    """--arch does not match the device."""


# ---- the device -----------------------------------------------------------------------------

_CUDA_PROBE = (
    "import json, torch\n"
    "p = torch.cuda.get_device_properties(0)\n"
    "print(json.dumps({'name': p.name, 'major': p.major, 'minor': p.minor,"
    " 'sms': p.multi_processor_count, 'l2': getattr(p, 'L2_cache_size', None),"
    " 'arch': getattr(p, 'gcnArchName', None)}))\n"
)


def detect_device(
    backend: str, environment: dict[str, str], python: str, env: dict[str, str]
) -> DeviceInfo:
    """The device the harness will run on. CPU targets are identified without a child; GPU
    targets are asked in a child process with the target's environment."""
    if backend == "cpu":
        interpreted = environment.get("TRITON_INTERPRET", "") == "1"
        return DeviceInfo(
            kind="cpu-interpreter" if interpreted else "cpu",
            backend="cpu",
            architecture=platform.machine(),
        )
    try:
        out = subprocess.run(
            [python, "-c", _CUDA_PROBE],
            env={**env, **environment},
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        info = json.loads(out.stdout.strip().splitlines()[-1])
    except (subprocess.SubprocessError, OSError, ValueError, IndexError) as e:
        detail = getattr(e, "stderr", "") or str(e)
        last = detail.strip().splitlines()[-1] if detail.strip() else type(e).__name__
        raise ConfigError(f"no {backend} device found for target.json's backend: {last}") from None
    arch = (
        info["arch"]
        if backend == "hip" and info.get("arch")
        else f"sm_{info['major']}{info['minor']}"
    )
    return DeviceInfo(
        kind=info["name"],
        backend=backend,  # type: ignore[arg-type]
        architecture=arch,
        num_sms=info.get("sms"),
        l2_bytes=info.get("l2"),
    )


def _norm_arch(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum()).removeprefix("sm")


def check_arch(arch: str | None, device: DeviceInfo) -> None:
    """Raise ArchMismatchError when --arch names another architecture than the device's."""
    if arch is None:
        return
    have = device.architecture or ""
    if _norm_arch(arch) != _norm_arch(have):
        raise ArchMismatchError(
            f"--arch {arch} does not match the device: {device.kind} is {have or 'of unknown architecture'}"
        )


# ---- the wrong-answer mutant ----------------------------------------------------------------


class _PerturbStores(ast.NodeTransformer):
    def __init__(self) -> None:
        self.count = 0

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if not (isinstance(node.func, ast.Attribute) and node.func.attr == "store"):
            return node
        offset = ast.Constant(MUTANT_OFFSET)
        for kw in node.keywords:
            if kw.arg == "value":
                kw.value = ast.BinOp(kw.value, ast.Add(), offset)
                self.count += 1
                return node
        if len(node.args) >= 2:
            node.args[1] = ast.BinOp(node.args[1], ast.Add(), offset)
            self.count += 1
        return node


def wrong_answer_mutant(source: str) -> str | None:
    """The kernel with every stored value shifted by MUTANT_OFFSET, or None when it stores nothing."""
    tree = ast.parse(source)
    rewriter = _PerturbStores()
    tree = rewriter.visit(tree)
    if rewriter.count == 0:
        return None
    return ast.unparse(ast.fix_missing_locations(tree))


def unbuildable_source(source: str) -> str:
    return source + UNBUILDABLE_SUFFIX


# ---- the checks -----------------------------------------------------------------------------


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def baseline_checks(
    baseline: CandidateState, summary: EvalSummary, thresholds: Thresholds, protected: set[str]
) -> list[ValidationCheck]:
    """Checks on the untouched kernel's evidence."""
    checks: list[ValidationCheck] = []
    build = baseline.build
    if build is None:  # the harness could not be loaded, or the child died before building
        f = baseline.failures[-1] if baseline.failures else None
        name = (
            "harness"
            if f is not None and f.kind == FailureKind.HARNESS_ERROR
            else "baseline:evaluate"
        )
        detail = (
            (
                f"{f.kind.value}: {_last_line(f.diagnostics)}"
                if name != "harness"
                else _last_line(f.diagnostics)
            )
            if f
            else summary.reason
        )
        return [ValidationCheck(name=name, passed=False, detail=detail)]
    checks.append(
        ValidationCheck(
            name="harness", passed=True, detail="imports; has build, verify and benchmark"
        )
    )
    checks.append(
        ValidationCheck(
            name="baseline:build",
            passed=summary.built,
            detail=""
            if summary.built
            else _last_line(build.diagnostics if build else summary.reason),
        )
    )
    if not summary.built:
        return checks
    failed = [v for v in baseline.verifications if not v.passed and v.case_id in protected]
    ran = bool(baseline.verifications)
    checks.append(
        ValidationCheck(
            name="baseline:verify",
            passed=ran and not failed,
            detail=(
                f"protected case {failed[0].case_id} failed verification: {_last_line(failed[0].diagnostics)}"
                if failed
                else ("every protected case verifies" if ran else summary.reason)
            ),
        )
    )
    if not summary.benchmarked:
        checks.append(
            ValidationCheck(
                name="baseline:samples",
                passed=False,
                detail=summary.reason or "the baseline was not benchmarked",
            )
        )
        return checks
    noisy = []
    for case_id, samples in baseline.samples_by_case(Phase.VALIDATION).items():
        c = stats.cv(samples)
        if c > thresholds.max_cv:
            noisy.append(f"case {case_id} has CV {c:.3f} > --max-cv {thresholds.max_cv}")
    checks.append(
        ValidationCheck(
            name="baseline:samples",
            passed=not noisy,
            detail="; ".join(noisy) or "positive and repeatable",
        )
    )
    own = [p for p in baseline.profiles if attribution.is_attribution(p)]
    if own:
        checks.append(_attribution_check(own))
    checks.append(_profile_check([p for p in baseline.profiles if p not in own]))
    return checks


def _attribution_check(profiles: list[ProfileCollected]) -> ValidationCheck:
    """tlxdb's own launch attribution of the baseline; where it cannot run, a warning that
    says so (never a failure: the candidate is still measured)."""
    mains = sorted({k for p in profiles if (k := attribution.main_kernel_of(p))})
    if mains:
        return ValidationCheck(
            name="baseline:attribution", passed=True, detail=f"main kernel {', '.join(mains)}"
        )
    reasons = [p.diagnostics for p in profiles if p.diagnostics]
    return ValidationCheck(
        name="baseline:attribution",
        passed=True,
        detail="warning: " + (_last_line(reasons[0]) if reasons else "no kernel was attributed"),
    )


def _profile_check(profiles: list[ProfileCollected]) -> ValidationCheck:
    if not profiles:
        return ValidationCheck(
            name="baseline:profile", passed=True, detail="the harness has no profile()"
        )
    attributed = [p for p in profiles if p.kernel_names]
    if attributed:
        names = sorted({n for p in attributed for n in p.kernel_names})
        return ValidationCheck(
            name="baseline:profile", passed=True, detail=f"time attributed to {', '.join(names)}"
        )
    diag = _last_line(profiles[0].diagnostics)
    return ValidationCheck(
        name="baseline:profile",
        passed=False,
        detail=f"the profile attributes time to no kernel{': ' + diag if diag else ''}",
    )


def negative_checks(evaluator: Evaluator, source: str, timeout_s: float) -> list[ValidationCheck]:
    """The trust-boundary tests: an unbuildable source and a wrong-answer mutant must be refused."""
    sink: list[Event] = []
    checks = []
    broken = evaluator.evaluate(
        _probe_request("negative-unbuildable", unbuildable_source(source), timeout_s), sink.append
    )
    checks.append(
        ValidationCheck(
            name="negative:unbuildable",
            passed=not broken.built,
            detail="build() refused a source with a syntax error"
            if not broken.built
            else "build() accepted a source with a syntax error: it cannot tell a broken kernel",
        )
    )
    mutant = wrong_answer_mutant(source)
    if mutant is None:
        checks.append(
            ValidationCheck(
                name="negative:wrong_answer",
                passed=True,
                detail="not run: the kernel has no store call to perturb",
            )
        )
        return checks
    wrong = evaluator.evaluate(
        _probe_request("negative-wrong-answer", mutant, timeout_s), sink.append
    )
    if not wrong.built:
        detail = "inconclusive: the perturbed kernel did not build"
        passed = True
    elif wrong.verified:
        detail = "verify() accepted a kernel whose stored values are off by 1.0: it cannot catch a wrong answer"
        passed = False
    else:
        detail = "verify() refused a kernel whose stored values are off by 1.0"
        passed = True
    checks.append(ValidationCheck(name="negative:wrong_answer", passed=passed, detail=detail))
    return checks


def _probe_request(candidate_id: str, source: str, timeout_s: float) -> EvalRequest:
    return EvalRequest(
        candidate_id=candidate_id,
        source=source,
        phase=Phase.VALIDATION,
        repetitions=1,
        timeout_s=timeout_s,
        verify_repeats=1,
        profile=False,
    )


def validate(
    evaluator: Evaluator,
    frozen: FrozenBundle,
    source: str,
    thresholds: Thresholds,
    baseline: Callable[[], CandidateState],
    emit: Callable[[Event], None],
    artifacts_dir: Path | None = None,
) -> list[ValidationCheck]:
    """Run every check. The baseline's evidence goes to `emit` (the candidate "baseline" must
    already be proposed); `baseline()` returns its state as folded so far."""
    frozen.check()
    summary = evaluator.evaluate(
        EvalRequest(
            candidate_id=BASELINE_ID,
            source=source,
            phase=Phase.VALIDATION,
            repetitions=thresholds.benchmark_repetitions,
            timeout_s=thresholds.max_candidate_seconds,
            artifacts_dir=artifacts_dir,
        ),
        emit,
    )
    protected = {c.case_id for c in frozen.bundle.cases if c.protected}
    checks = baseline_checks(baseline(), summary, thresholds, protected)
    if all(c.passed for c in checks):
        checks += negative_checks(evaluator, source, thresholds.max_candidate_seconds)
    frozen.check()
    return checks


def failure_message(checks: list[ValidationCheck]) -> str:
    """One line naming the first failed check."""
    first = next(c for c in checks if not c.passed)
    return f"bundle validation failed ({first.name}): {first.detail}"
