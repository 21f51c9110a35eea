"""The per-candidate pipeline: one candidate's commands in a harness child, turned into events.

A `Run` sends one candidate's build, verify, benchmark, attribute and profile commands through a
session (optimizer.evaluation.session) and emits every result as the event it is, as it happens;
`measure_window` benchmarks the members of a window (optimizer.evaluation.window) block by
block. Which child runs them, and how an evaluation ends, is the evaluator's
(optimizer.evaluation.evaluator).

Invariants:
- Every result becomes an event handed to `emit` as it happens (BuildFinished, CaseVerified,
  LaunchesObserved, BenchmarkSampled, MachineSampled, ProfileCollected, IntegrityFlagged,
  InfrastructureFailed).
- The child reports the functions the candidate replaced after every call: with snapshot checks
  on, each is a blocking IntegrityFlagged and the evaluation stops (`Stop`).
- A harness that raises is a failed build or verification, a HARNESS_ERROR, or a profile with
  diagnostics; nothing it does raises out of a `Run` but `Stop`, HarnessInvalidError and the
  session's ChildGone.
"""

from __future__ import annotations

import copy
import hashlib
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from optimizer.bundle.spec import CaseSpec
from optimizer.decision import machine, stats
from optimizer.evaluation import attribution, window
from optimizer.evaluation.requests import EvalRequest, HarnessInvalidError
from optimizer.evaluation.session import Session, last_line, tail
from tlxstore.events import (
    BASELINE_ID,
    BenchmarkSampled,
    BuildFinished,
    CaseVerified,
    Event,
    FailureKind,
    InfrastructureFailed,
    IntegrityFlagged,
    KernelLaunch,
    LaunchesObserved,
    MachineSampled,
    Phase,
    ProfileCollected,
    ProfileMetric,
)

if TYPE_CHECKING:
    from optimizer.evaluation.evaluator import Evaluator

Emit = Callable[[Event], None]

PROFILE_SOURCES = ("proton", "ncu", "harness")


class Stop(Exception):
    """The evaluation ends early (the reason was already emitted)."""

    def __init__(self, reason: str, *, blocked: bool = False, infra: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.blocked = blocked
        self.infra = infra


class Progress:
    """How far an evaluation got, and the stage it is in (for failure events)."""

    def __init__(self) -> None:
        self.stage = "build"
        self.built = False
        self.verified = False
        self.benchmarked = False


class Run:
    """One candidate's commands within a session, turned into events."""

    def __init__(
        self,
        ev: Evaluator,
        session: Session,
        cid: str,
        phase: Phase,
        emit: Emit,
        window_id: str | None = None,
    ):
        self.ev = ev
        self.session = session
        self.cid = cid
        self.phase = phase
        self.emit = emit
        self.window_id = window_id or cid  # the window its samples are recorded in
        self.instance = 1  # which build of its source in this child it measures (BenchmarkSampled)
        self.declared: dict[str, tuple[int | None, int | None]] = {}  # case -> (bytes, flops)

    def in_window(self, window_id: str, instance: int | None = None) -> Run:
        """This candidate's commands, recorded in another window of the same child (and as
        another instance of its source, when given)."""
        other = copy.copy(self)
        other.window_id = window_id
        if instance is not None:
            other.instance = instance
        return other

    def fail(self, candidate_id: str, stage: str, detail: str, reason: str) -> NoReturn:
        """Record a harness error of `candidate_id` at `stage` and stop the evaluation."""
        self.emit(
            InfrastructureFailed(
                candidate_id=candidate_id,
                stage=stage,
                kind=FailureKind.HARNESS_ERROR,
                retryable=False,
                diagnostics=tail(detail),
            )
        )
        raise Stop(reason)

    def call(self, msg: dict[str, Any]) -> dict[str, Any]:
        """One command's reply; a function the candidate replaced during it stops the evaluation."""
        reply = self.session.call(msg)
        patched = (reply.get("patched") or []) if self.ev.snapshot_checks else []
        if patched:
            for name in patched:
                self.emit(
                    IntegrityFlagged(
                        candidate_id=self.cid,
                        guard=f"patched:{name}",
                        detail=f"the candidate replaced {name} (during {msg['op']})",
                        blocking=True,
                    )
                )
            raise Stop(f"the candidate replaced {patched[0]}", blocked=True)
        return reply

    def build(self, key: str, source: str) -> bool:
        reply = self.call(
            {"op": "build", "key": key, "source": source, "target": self.ev.bundle.target}
        )
        if not reply.get("ok"):
            raise HarnessInvalidError(str(reply.get("error")))
        self.emit(
            BuildFinished(
                candidate_id=self.cid,
                success=bool(reply["success"]),
                duration_ms=float(reply["duration_ms"]),
                diagnostics=tail(str(reply.get("diagnostics", ""))),
            )
        )
        return bool(reply["success"])

    def verify_cases(
        self, key: str, cases: list[CaseSpec], repeats: int, *, first_attempt: int
    ) -> list[CaseSpec]:
        """Verify each case `repeats` times with fresh seeds; return the cases that passed every
        time. A protected case that fails ends the evaluation."""
        kept = []
        for case in cases:
            ok = True
            for attempt in range(first_attempt, first_attempt + repeats):
                seed = self.ev._seed()
                msg = {"op": "verify", "key": key, "case": case_dict(case), "seed": seed}
                # the first verification says what the kernels are launched with; the baseline's
                # second, compiled by then, how long each one runs (which kernel tune takes first)
                observe = attempt == 1 or (attempt == 2 and self.cid == BASELINE_ID)
                reply = self.call({**msg, "observe": observe})
                if not reply.get("ok"):
                    raise HarnessInvalidError(str(reply.get("error")))
                passed = bool(reply["passed"])
                self.emit(
                    CaseVerified(
                        candidate_id=self.cid,
                        case_id=case.case_id,
                        passed=passed,
                        phase=self.phase,
                        attempt=attempt,
                        seed=seed,
                        diagnostics=tail(str(reply.get("diagnostics", ""))),
                        metrics=reply.get("metrics") or {},
                    )
                )
                if reply.get("launches"):
                    self.emit(
                        LaunchesObserved(
                            candidate_id=self.cid,
                            case_id=case.case_id,
                            launches=[KernelLaunch(**x) for x in reply["launches"]],
                            attempt=attempt,
                        )
                    )
                if not passed:
                    ok = False
                    break
            if not ok and case.protected:
                raise Stop(f"protected case {case.case_id} failed verification (attempt {attempt})")
            if ok:
                kept.append(case)
        return kept

    def benchmark_case(
        self,
        key: str,
        case: CaseSpec,
        repetitions: int,
        *,
        block: int,
        warm_up_s: float | None = None,
        extra: bool = False,
    ) -> tuple[list[float], bool]:
        """One harness call benchmarking one case; its samples, and whether the call is marked
        (it ran while the GPU throttled or was shared: optimizer.decision.machine; the child
        samples NVML while the call runs, where it can). `warm_up_s`: first, calls of
        `benchmark(artifact, case, 1)` until that many seconds have passed (at least one), their
        samples kept as `warmup_samples_us` and out of every statistic (measure_window says
        which calls get them and why)."""
        warm: list[float] = [] if warm_up_s is None else self._warm_up(key, case, warm_up_s)
        reply = self.call(
            {
                "op": "benchmark",
                "key": key,
                "case": case_dict(case),
                "repetitions": repetitions,
                "machine": True,
            }
        )
        if not reply.get("ok"):
            detail = str(reply.get("error"))
            if reply.get("traceback"):
                detail += "\n" + str(reply["traceback"])
            self.fail(
                self.cid,
                "benchmark",
                f"case {case.case_id}: {detail}",
                f"the harness benchmark failed on case {case.case_id}: {last_line(detail)}",
            )
        samples = [float(s) for s in reply["samples_us"]]
        self.declared[case.case_id] = (reply.get("bytes_moved"), reply.get("flops"))
        self.emit(
            BenchmarkSampled(
                candidate_id=self.cid,
                case_id=case.case_id,
                phase=self.phase,
                block=block,
                window_id=self.window_id,
                instance=self.instance,
                extra=extra,
                samples_us=samples,
                warmup_count=reply.get("warmup_count"),
                cache_policy=reply.get("cache_policy"),
                bytes_moved=reply.get("bytes_moved"),
                flops=reply.get("flops"),
                warmup_samples_us=warm,
            )
        )
        if not reply.get("machine"):
            return samples, False
        state = MachineSampled(
            candidate_id=self.cid,
            case_id=case.case_id,
            phase=self.phase,
            window_id=self.window_id,
            block=block,
            instance=self.instance,
            **reply["machine"],
        )
        self.emit(state)
        return samples, bool(machine.marks(state))

    def _warm_up(self, key: str, case: CaseSpec, seconds: float) -> list[float]:
        """Calls of `benchmark(artifact, case, 1)` until `seconds` have passed (at least one, at
        most window.MAX_WARM_UP_CALLS); their samples, or those before the first that fails (the
        benchmark proper then says why, if it fails too)."""
        msg = {"op": "benchmark", "key": key, "case": case_dict(case), "repetitions": 1}
        samples: list[float] = []
        start = time.monotonic()
        for _ in range(window.MAX_WARM_UP_CALLS):
            reply = self.call(msg)
            if not reply.get("ok"):
                break
            samples.extend(float(x) for x in reply["samples_us"])
            if time.monotonic() - start >= seconds:
                break
        return samples

    def attribute_cases(
        self, key: str, cases: list[CaseSpec], source: str, artifacts_dir: Path | None
    ) -> int:
        """Launch attribution under Proton, one extra harness call per case (see attribution):
        `benchmark(artifact, case, 1)`, or `verify` where that benchmark raises under Proton;
        returns how many cases got it."""
        own = attribution.kernel_functions(source)
        attributed = 0
        for case in cases:
            case_dir = self._case_dir(case, artifacts_dir, "proton")
            failed: list[str] = []  # why each harness call failed under Proton
            for mode in ("benchmark", "verify"):
                reply = self.call(
                    {
                        "op": "attribute",
                        "key": key,
                        "case": case_dict(case),
                        "mode": mode,
                        "artifacts_dir": str(case_dir.resolve()),
                    }
                )
                if reply.get("ok"):
                    break
                failed.append(
                    f"{mode}: {reply.get('error')}"
                    + (f": {last_line(reply['traceback'])}" if reply.get("traceback") else "")
                )
            if not reply.get("ok"):
                detail = "; ".join(failed)
                self.emit(attribution.unavailable_event(self.cid, case.case_id, tail(detail)))
            elif not reply.get("available"):
                reason = str(reply.get("reason"))
                self.emit(attribution.unavailable_event(self.cid, case.case_id, reason))
                if "unavailable on this target" in reason:
                    return attributed  # the same for every case: one event says it
            else:
                event = attribution.attribution_event(self.cid, case.case_id, reply, own)
                if failed:  # attributed over verify: say why
                    note = f"attributed over verify; benchmark(artifact, case, 1) {failed[0]}"
                    event = event.model_copy(
                        update={"diagnostics": "\n".join(filter(None, [note, event.diagnostics]))}
                    )
                self.emit(event)
                attributed += 1
        return attributed

    def _case_dir(self, case: CaseSpec, artifacts_dir: Path | None, scratch: str) -> Path:
        """The folder a profiler writes a case's raw files to, made: under `artifacts_dir` (by
        candidate and case) when there is one, else under `scratch` in the child's own folder."""
        root = (
            Path(artifacts_dir) / self.cid
            if artifacts_dir is not None
            else self.session.workdir / scratch
        )
        case_dir = root / case_folder(case.case_id)
        case_dir.mkdir(parents=True, exist_ok=True)
        return case_dir

    def profile_cases(
        self, key: str, cases: list[CaseSpec], profile_args: int, artifacts_dir: Path | None
    ) -> None:
        for case in cases:
            case_dir = self._case_dir(case, artifacts_dir, "profile")
            request = {
                "level": "summary",
                "tools": ["proton_launch", "native_profiler"],
                "experiment_id": self.cid,
                "artifacts_dir": str(case_dir.resolve()),
                "reason": "candidate evaluation",
                "diagnostic_only": False,
            }
            reply = self.call(
                {
                    "op": "profile",
                    "key": key,
                    "case": case_dict(case),
                    "request": request,
                    "profile_args": profile_args,
                }
            )
            if not reply.get("ok"):
                detail = str(reply.get("error")) + (
                    f": {last_line(reply['traceback'])}" if reply.get("traceback") else ""
                )
                self.emit(
                    ProfileCollected(
                        candidate_id=self.cid,
                        case_id=case.case_id,
                        metrics=[],
                        diagnostics=tail(detail),
                    )
                )
                continue
            metrics, kernels, artifacts, diagnostics = profile_metrics(reply["result"])
            self.emit(
                ProfileCollected(
                    candidate_id=self.cid,
                    case_id=case.case_id,
                    metrics=metrics,
                    kernel_names=kernels,
                    diagnostics=tail(diagnostics),
                    artifacts=artifacts,
                )
            )


def measure_window(
    members: list[tuple[Run, str]],
    cases: list[CaseSpec],
    req: EvalRequest,
    *,
    warm_up: bool = False,
) -> dict[str, float]:
    """Benchmark `members` (each a candidate's commands and its artifact key; the evaluated one
    first) alternately, block by block, in whole turns (optimizer.evaluation.window). Then more
    turns for the cases that need them: a case with a marked call (it ran while the GPU throttled
    or was shared) gets turns until as many extra blocks as it had marked calls were measured, up
    to window.MAX_REMEASURED_BLOCKS blocks; a case noisier than req.max_cv, judged on the calls that
    are not marked, gets one up to req.max_extra_blocks blocks. Returns the first member's median
    per case, marked calls left out (a case with none left is missing).

    Warm-up (benchmark_case; its samples are `warmup_samples_us`, in no statistic): every
    member's first call on each case is preceded by one call of `benchmark(artifact, case, 1)`,
    one extra call per member and case a window. A reference is built in the child but not
    verified, and a second window's instances are built anew, so the first call of each on a
    case compiles its kernels for that case or runs its autotuner's search: a user's baseline
    read [1411554, 68373, 68077, ...] us, its autotuner's search in the first sample, and the
    case was then over max_cv, got every extra block and lost its p95 check. The candidate,
    verified in this child, gets the same call, so every member's first sample comes after one.
    `warm_up`: the window's very first call warms up for the evaluator's warm_up_s instead (at
    least one call; window.GPU_WARM_UP_S on a GPU), since the GPU idled through build and
    verification: on the H200 a GEMM's clock swings for about two seconds after that idle."""
    samples: dict[str, dict[str, list[float]]] = {key: {} for _, key in members}
    owed: dict[str, int] = {}  # case -> its marked calls not yet measured again
    timed = warm_up and bool(cases)  # the window's first call is still to warm up for warm_up_s
    warmed: set[tuple[str, str]] = set()  # (member's key, case) whose first call was made

    size = window.per_call(req.repetitions)
    turn = len(members)
    first = window.first_blocks(req.repetitions, turn)

    def block(index: int, repetitions: int, block_cases: list[CaseSpec], extra: bool) -> None:
        nonlocal timed
        for case in block_cases:
            for run, key in window.order(members, index, first):
                warm_up_s = None
                if (key, case.case_id) not in warmed:
                    warm_up_s = run.ev.warm_up_s if timed else 0.0
                    warmed.add((key, case.case_id))
                got, was_marked = run.benchmark_case(
                    key, case, repetitions, block=index, warm_up_s=warm_up_s, extra=extra
                )
                timed = False
                if was_marked:
                    owed[case.case_id] = owed.get(case.case_id, 0) + 1
                else:
                    samples[key].setdefault(case.case_id, []).extend(got)

    for index in range(first):
        block(index, size, cases, False)
    index = first
    by_id = {c.case_id: c for c in cases}
    remeasure_turns = window.MAX_REMEASURED_BLOCKS // turn
    noisy_turns = window.extra_turns(req.max_extra_blocks, turn) if req.max_cv is not None else 0
    while True:
        again = [c for c in by_id if owed.get(c)] if remeasure_turns else []
        noisy = (
            window.noisy_cases(samples, list(by_id), req.max_cv)
            if noisy_turns and req.max_cv is not None
            else []
        )
        todo = [by_id[c] for c in by_id if c in again or c in noisy]
        if not todo:
            break
        for _ in range(turn):  # a whole turn: each member first once
            block(index, size, todo, True)
            index += 1
        for c in again:  # the turn's blocks measured that many marked calls again
            owed[c] = max(0, owed[c] - turn)
        if again:
            remeasure_turns -= 1
        else:
            noisy_turns -= 1
    own = members[0][1]
    return {case: stats.median(s) for case, s in samples[own].items() if s}


def profile_metrics(
    result: dict[str, Any],
) -> tuple[list[ProfileMetric], list[str], list[str], str]:
    """Flatten a profile result into metrics (None kept as unknown), kernel names, artifact paths
    and diagnostics. Units are taken from a `<name>_<unit>` suffix where there is one."""
    metrics: list[ProfileMetric] = []
    kernels: list[str] = []
    artifacts: list[str] = []
    diagnostics: list[str] = []

    def walk(prefix: str, value: Any, source: str) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v, source)
            return
        leaf = prefix.rsplit(".", 1)[-1]
        if leaf in ("kernel_names", "kernels") and isinstance(value, list):
            kernels.extend(str(v) for v in value if isinstance(v, str))
        elif leaf in ("diagnostics", "diagnostic", "error") and value:
            diagnostics.append(f"{prefix}: {value}")
        elif leaf == "artifact" and isinstance(value, str) and os.path.isabs(value):
            artifacts.append(value)
        elif leaf in ("artifacts", "artifact_paths") and isinstance(value, list):
            artifacts.extend(str(v) for v in value if isinstance(v, str) and os.path.isabs(v))
        elif isinstance(value, str) and os.path.isabs(value) and leaf.endswith(("path", "file")):
            artifacts.append(value)
        elif value is None or (isinstance(value, int | float) and not isinstance(value, bool)):
            unit = leaf.rsplit("_", 1)[-1] if "_" in leaf else ""
            metrics.append(
                ProfileMetric(
                    name=prefix,
                    value=None if value is None else float(value),
                    unit=unit,
                    source=source,
                )
            )

    for key, value in result.items():
        source = key if key in PROFILE_SOURCES else "harness"
        walk(str(key), value, source)
    return metrics, kernels, artifacts, "\n".join(diagnostics)


def case_folder(case_id: str) -> str:
    """A case's folder name under an artifacts dir: the case id when it is a plain file name,
    else its safe characters and a short digest of the id (no "/" or ".." ever leaves the dir)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", case_id).strip("._-")[:80] or "case"
    if safe == case_id:
        return safe
    return f"{safe}-{hashlib.sha256(case_id.encode()).hexdigest()[:8]}"


def case_dict(case: CaseSpec) -> dict[str, Any]:
    """The case as cases.json gave it (handed to the harness unchanged)."""
    return case.model_dump(mode="json")
