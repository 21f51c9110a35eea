"""The evaluator: which harness child serves which candidate, and how each evaluation ends.

`Evaluator` is the facade the loop and validation call (`evaluate`, `revalidate`,
`check_harness`). It keeps the pool of harness children: the child's environment, a child started
early and loading the harness for the next candidate (`prestart`, `keep_ready`), the copies of one
device of a parallel run (`pinned`) and `stop`. Each evaluation runs the per-candidate pipeline
(optimizer.evaluation.pipeline) in one child session (optimizer.evaluation.session) and turns every
way it can end into events and an EvalSummary.

Invariants:
- The harness and the candidate only ever run in the child (`python -m optimizer.evaluation.child`),
  with tlxdb's environment without its secrets, then the bundle's environment, applied to the
  child alone.
- A timeout kills the whole process group (InfrastructureFailed TIMEOUT, retryable); a child that
  dies is a CRASH (retryable); a harness that raises is a failed build/verification or a
  HARNESS_ERROR (not retryable). Nothing the harness does raises out of `evaluate`.
- Guards (optimizer.evaluation.guards): static checks before the child starts; the child reports
  replaced functions after every call; the protected files are hashed before and after;
  implausible measurements trigger extra verification and a re-benchmark.
"""

from __future__ import annotations

import copy
import os
import secrets
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from optimizer.bundle.spec import CaseSpec
from optimizer.evaluation import attribution, window
from optimizer.evaluation.guards import files as file_guard
from optimizer.evaluation.guards import static as static_guard
from optimizer.evaluation.guards import tripwire
from optimizer.evaluation.pipeline import Emit, Progress, Run, Stop, measure_window
from optimizer.evaluation.requests import (
    EvalRequest,
    EvalSummary,
    HarnessBundle,
    HarnessInvalidError,
)
from optimizer.evaluation.session import ChildGone, Session, last_line
from tlxstore.config import settings
from tlxstore.events import (
    FailureKind,
    InfrastructureFailed,
    IntegrityFlagged,
    Phase,
    ProfilingFinished,
    remeasure_window,
)
from tlxstore.redaction import without_secrets

EXTRA_VERIFICATIONS = 2  # verifications per case added when a tripwire fires
PRESTART_DEADLINE_S = 24 * 3600.0  # a prestarted child waits for its candidate at most this long


class Evaluator:
    """Runs candidates through one frozen bundle's harness, each in a fresh child process.

    `python`: the child's interpreter (default TLXDB_CHILD_PYTHON, else this one).
    `peak_*`: hardware ceilings for the throughput tripwire (None: not judged).
    `seed_source`: where verification seeds come from (default: fresh random 62-bit seeds).
    `warm_up_s`: how long a window warms up before its first samples (at least one call;
    window.GPU_WARM_UP_S on a GPU).
    `trusted_source`: the user's own kernel; static findings it shares are not flagged (an
    in-place kernel may keep writing into its input).
    `static_checks` / `snapshot_checks` exist to show what the guards catch (tests of the
    adversarial corpus turn them off to prove the other guards independently); tlxdb always runs
    with both on.
    """

    def __init__(
        self,
        bundle: HarnessBundle,
        *,
        python: str | None = None,
        static_checks: bool = True,
        snapshot_checks: bool = True,
        trusted_source: str | None = None,
        peak_bandwidth_bytes_per_s: float | None = None,
        peak_flops_per_s: float | None = None,
        seed_source: Callable[[], int] | None = None,
        warm_up_s: float = 0.0,
    ) -> None:
        self.bundle = bundle
        self.python = python or settings().child_python or sys.executable
        self.static_checks = static_checks
        self.snapshot_checks = snapshot_checks
        self.trusted_source = trusted_source
        self.peak_bandwidth_bytes_per_s = peak_bandwidth_bytes_per_s
        self.peak_flops_per_s = peak_flops_per_s
        self._seed = seed_source or (lambda: secrets.randbits(62))
        self.warm_up_s = warm_up_s
        self.pin: dict[str, str] = {}  # set on the children of one device (`pinned`)
        self._live: set[Session] = set()  # children running now, shared with pinned copies
        self.keep_ready = False  # start the next candidate's child once a benchmark is done
        self._ready: Session | None = None  # that child: started, loading the harness

    def pinned(self, env: Mapping[str, str]) -> Evaluator:
        """This evaluator for one device of a parallel run: its children get `env` on top of
        everything else (e.g. CUDA_VISIBLE_DEVICES=3). Copies share `stop`."""
        other = copy.copy(self)
        other.pin = dict(env)
        other._ready = None
        return other

    def for_probes(self) -> Evaluator:
        """This evaluator for sources tlxdb writes itself (validation's probes): no static
        checks, and a child of its own for each probe. The child this evaluator keeps ready for
        the first candidate stays its own (it loads while the probes run), and a probe starts
        none that nobody would take."""
        other = copy.copy(self)
        other.static_checks = False
        other.keep_ready = False
        other._ready = None
        return other

    def stop(self) -> None:
        """Kill every harness child this evaluator and its pinned copies have running (their
        evaluations end as crashes); for a parallel loop that is interrupted."""
        for session in list(self._live):
            session.kill()

    def close(self) -> None:
        """End the child kept ready for a next candidate, if there is one."""
        ready, self._ready = self._ready, None
        if ready is not None:
            ready.kill()
            ready.close()
            self._live.discard(ready)

    def prestart(self) -> None:
        """Start the next evaluation's child now: Python, torch and the harness load while the
        loop profiles, decides and proposes (CPU work, never beside a benchmark sample)."""
        if self._ready is not None:
            return
        session = self._start(PRESTART_DEADLINE_S)
        try:
            session.send(self._load_message())
        except ChildGone:
            session.close()
            self._live.discard(session)
            return
        session.load_sent = True
        self._ready = session

    def _take_ready(self, timeout_s: float) -> Session | None:
        """The prestarted child, its deadline now this evaluation's (None: none, or it died)."""
        ready, self._ready = self._ready, None
        if ready is None:
            return None
        if ready.proc.poll() is not None:
            ready.close()
            self._live.discard(ready)
            return None
        ready.deadline = time.monotonic() + timeout_s
        return ready

    # ---- the child -------------------------------------------------------------------------
    def _child_env(self) -> dict[str, str]:
        """tlxdb's environment without its secrets, then the bundle's target environment, and
        the repository root (where the child's `optimizer` package lives) on PYTHONPATH."""
        env = without_secrets(os.environ)
        env.update(self.bundle.environment)
        env.update(self.pin)
        repo = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (repo, env.get("PYTHONPATH", "")) if p)
        env.setdefault("PYTHONUNBUFFERED", "1")
        return env

    def _start(self, timeout_s: float) -> Session:
        session = Session(self.bundle, self.python, time.monotonic() + timeout_s, self._child_env())
        self._live.add(session)
        return session

    def _load_message(self) -> dict[str, Any]:
        return {
            "op": "load",
            "bundle_root": str(self.bundle.root),
            "harness_file": self.bundle.harness_file,
        }

    def _load(self, session: Session) -> dict[str, Any]:
        if session.load_sent:
            session.load_sent = False
            reply = session.receive()
        else:
            reply = session.call(self._load_message())
        if not reply.get("ok"):
            raise HarnessInvalidError(
                f"{self.bundle.harness_file}: {reply.get('error')}"
                + (f": {last_line(reply['traceback'])}" if reply.get("traceback") else "")
            )
        return reply

    def check_harness(self, timeout_s: float = 120.0) -> None:
        """Import the harness in a child; raise HarnessInvalidError when it cannot be used."""
        session = self._start(timeout_s)
        try:
            self._load(session)
        except ChildGone as e:
            raise HarnessInvalidError(
                f"{self.bundle.harness_file}: loading it failed: {last_line(e.detail)}"
            ) from None
        finally:
            session.close()
            self._live.discard(session)

    # ---- evaluate --------------------------------------------------------------------------
    def evaluate(
        self,
        req: EvalRequest,
        emit: Emit,
        before_benchmark: Callable[[], None] | None = None,
        after_benchmark: Callable[[], None] | None = None,
        second_window: Callable[[], bool] | None = None,
    ) -> EvalSummary:
        """Build, verify (repeatedly, fresh seeds), benchmark, verify again, profile; emit events.
        `before_benchmark` runs once the candidate verified, right before its first sample (the
        loop waits there for work of its own that must not overlap a sample); `after_benchmark`
        once its last sample is taken (the loop may start work of its own from there on).
        `second_window` is asked once the first window's events are emitted (and no tripwire
        measured a second one already); True: every member is built again (new instances, no
        build event) and measured beside the first instances in a second window,
        remeasure_window(candidate): the loop asks for it when the first window alone would
        promote (optimizer.decision.policy, rule 7)."""
        cid = req.candidate_id
        if self.static_checks:
            findings = static_guard.check_source(req.source, self.trusted_source)
            for f in findings:
                emit(
                    IntegrityFlagged(
                        candidate_id=cid, guard=f.guard, detail=f.detail, blocking=True
                    )
                )
            if findings:
                return EvalSummary(
                    candidate_id=cid,
                    built=False,
                    verified=False,
                    benchmarked=False,
                    blocked_by_guard=True,
                    reason=findings[0].detail,
                )

        def body(session: Session, loaded: dict[str, Any], p: Progress) -> None:
            run = Run(self, session, cid, req.phase, emit, window_id=cid)
            if not run.build("A", req.source):
                raise Stop("build failed")
            p.built = True
            p.stage = "verify"
            cases = run.verify_cases("A", self.bundle.cases, req.verify_repeats, first_attempt=1)
            p.verified = True
            p.stage = "build"
            members = [(run, "A"), *self._references(session, req, emit)]
            p.stage = "benchmark"
            if before_benchmark is not None:
                before_benchmark()
            medians = measure_window(members, cases, req, warm_up=True)
            p.benchmarked = True
            p.stage = "verify"
            run.verify_cases("A", cases, 1, first_attempt=req.verify_repeats + 1)
            tripped = self._tripwires(members, cases, req, medians, p)
            if not tripped and second_window is not None and second_window():
                p.stage = "benchmark"
                measure_window(self._rebuilt(members, req), cases, req)
            if self.keep_ready:  # the last sample is taken: the next child may start loading
                self.prestart()
            if after_benchmark is not None:
                after_benchmark()
            if req.profile:
                p.stage = "profile"
                t0 = time.monotonic()
                if run.attribute_cases("A", cases, req.source, req.artifacts_dir):
                    wall_ms = (time.monotonic() - t0) * 1e3
                    emit(
                        ProfilingFinished(
                            candidate_id=cid,
                            tool=attribution.SOURCE,
                            cases=len(cases),
                            wall_ms=wall_ms,
                            waited_ms=wall_ms,
                        )
                    )
            if req.profile and loaded.get("profile_args"):
                p.stage = "profile"
                run.profile_cases("A", cases, loaded["profile_args"], req.artifacts_dir)

        return self._session(cid, req.timeout_s, emit, body)

    def _tripwires(
        self,
        members: list[tuple[Run, str]],
        cases: list[CaseSpec],
        req: EvalRequest,
        medians: dict[str, float],
        p: Progress,
    ) -> bool:
        """An implausible measurement (optimizer.evaluation.guards.tripwire) is flagged, verified
        EXTRA_VERIFICATIONS more times and measured again in a second window. Whether it was."""
        run = members[0][0]
        fired = tripwire.check(
            medians,
            req.parent_medians_us,
            run.declared,
            self.peak_bandwidth_bytes_per_s,
            self.peak_flops_per_s,
        )
        if not fired:
            return False
        for t in fired:
            run.emit(
                IntegrityFlagged(
                    candidate_id=run.cid, guard=t.guard, detail=t.detail, blocking=False
                )
            )
        run.verify_cases("A", cases, EXTRA_VERIFICATIONS, first_attempt=req.verify_repeats + 2)
        p.stage = "benchmark"
        again = [(r.in_window(remeasure_window(run.cid)), key) for r, key in members]
        measure_window(again, cases, req)
        return True

    def _rebuilt(self, members: list[tuple[Run, str]], req: EvalRequest) -> list[tuple[Run, str]]:
        """The members of the second window, remeasure_window(candidate): the first window's
        instances and every member built again in their child under new keys, A.2, R1.2, A.3 ...
        (the harness loads each source anew: another module, another launch path, other
        allocations), window.SECOND_WINDOW_INSTANCES instances of each, all alternated. Seen on
        the H200 (an A/A call on 2026-12-04 whose files were lost; issue 27's note has its
        numbers): on a launch-bound 4M+3-element case, one instance of a kernel ran 0.4-4%
        faster than the incumbent's instance in all 6 blocks of a window (1.022x, 99% CI
        1.000-1.025: promoted). One window's blocks cannot show that a gap belongs to the
        instances, not the sources; new instances give the decision a second pair of them, and
        the two instances of each source side by side in one window measure how far instances
        of one source run apart (optimizer.decision.stats.instance_variance)."""
        run = members[0][0]
        sources = {r.candidate_id: r.source for r in req.references} | {run.cid: req.source}
        wid = remeasure_window(run.cid)
        out = [(member.in_window(wid), key) for member, key in members]
        for instance in range(2, window.SECOND_WINDOW_INSTANCES + 1):
            for member, key in members:
                again = f"{key}.{instance}"
                self._build_beside(member, again, sources[member.cid], req, "again")
                out.append((member.in_window(wid, instance), again))
        return out

    def _references(self, session: Session, req: EvalRequest, emit: Emit) -> list[tuple[Run, str]]:
        """The request's references built in the child (keys R1, R2, ...), in its window. A
        reference that does not build here (it built when it was evaluated) ends the evaluation
        as a harness error."""
        out = []
        for i, ref in enumerate(req.references, start=1):
            run = Run(self, session, ref.candidate_id, req.phase, emit, req.candidate_id)
            self._build_beside(run, f"R{i}", ref.source, req, "beside it")
            out.append((run, f"R{i}"))
        return out

    def _build_beside(self, run: Run, key: str, source: str, req: EvalRequest, how: str) -> None:
        """Build `source` under `key` in the evaluated candidate's child, recording no build of
        its own (it built when it was evaluated); a failure ends the evaluation as a harness
        error, "the reference R did not build <how>", and a build the child refuses (an artifact
        the harness returned for another source already) as a harness error saying why."""
        reply = run.call(
            {"op": "build", "key": key, "source": source, "target": self.bundle.target}
        )
        if not reply.get("ok"):
            error = str(reply.get("error"))
            run.fail(req.candidate_id, "build", error, error)
        if reply.get("success"):
            return
        detail = last_line(str(reply.get("diagnostics") or ""))
        what = "it" if run.cid == req.candidate_id else f"the reference {run.cid}"
        run.fail(
            req.candidate_id,
            "build",
            f"{what} did not build {how}: {detail}",
            f"{what} did not build {how}",
        )

    # ---- final revalidation ----------------------------------------------------------------
    def revalidate(
        self,
        finalist_id: str,
        finalist_source: str,
        baseline_id: str,
        baseline_source: str,
        alternations: int,
        repetitions: int,
        timeout_s: float,
        emit: Emit,
        *,
        max_cv: float | None = None,
        max_extra_blocks: int = 0,
        window_id: str | None = None,
    ) -> EvalSummary:
        """Build finalist (A) and baseline (B) in one child, verify both, then benchmark them in
        one window (optimizer.evaluation.window) of `alternations` times `repetitions` samples
        per side and case, all with phase=REVALIDATION and window id `window_id` (default the
        finalist's; each replicate of a final revalidation has its own, in a child of its
        own); verify A once more after."""
        if alternations < 3:
            raise ValueError("final revalidation needs at least 3 alternations")
        wid = window_id or finalist_id

        def body(session: Session, loaded: dict[str, Any], p: Progress) -> None:
            a = Run(self, session, finalist_id, Phase.REVALIDATION, emit, wid)
            b = Run(self, session, baseline_id, Phase.REVALIDATION, emit, wid)
            if not a.build("A", finalist_source):
                raise Stop("the finalist failed to build")
            if not b.build("B", baseline_source):
                raise Stop("the baseline failed to build")
            p.built = True
            p.stage = "verify"
            cases = a.verify_cases("A", self.bundle.cases, 1, first_attempt=1)
            b.verify_cases("B", cases, 1, first_attempt=1)
            p.verified = True
            p.stage = "benchmark"
            plan = EvalRequest(
                candidate_id=finalist_id,
                source=finalist_source,
                repetitions=window.revalidation_repetitions(repetitions, alternations),
                timeout_s=timeout_s,
                max_cv=max_cv,
                max_extra_blocks=max_extra_blocks,
            )
            measure_window([(a, "A"), (b, "B")], cases, plan, warm_up=True)
            p.benchmarked = True
            p.stage = "verify"
            a.verify_cases("A", cases, 1, first_attempt=2)

        return self._session(finalist_id, timeout_s, emit, body)

    def build_apart(
        self, cid: str, first: str, second: str, timeout_s: float, emit: Emit
    ) -> EvalSummary:
        """Build two different sources one after the other in one child, as a candidate and the
        reference beside it are built, and nothing else. A harness that hands the second build
        the first one's artifact (a kernel imported under a fixed module name) ends it as a
        harness error whose reason is the child's (SAME_ARTIFACT)."""

        def body(session: Session, loaded: dict[str, Any], p: Progress) -> None:
            run = Run(self, session, cid, Phase.VALIDATION, emit, window_id=cid)
            if not run.build("A", first) or not run.build("B", second):
                raise Stop("build failed")
            p.built = True

        return self._session(cid, timeout_s, emit, body)

    # ---- one child, start to end -----------------------------------------------------------
    def _session(
        self,
        cid: str,
        timeout_s: float,
        emit: Emit,
        body: Callable[[Session, dict[str, Any], Progress], None],
    ) -> EvalSummary:
        """Run `body` in a fresh child; turn every way it can end into events and a summary, and
        check the protected files afterwards."""
        before = file_guard.hash_paths(self.bundle.protected_paths)
        p = Progress()
        reason, blocked, infra = "", False, False
        session = self._take_ready(timeout_s) or self._start(timeout_s)
        try:
            loaded = self._load(session)
            body(session, loaded, p)
        except Stop as s:
            reason, blocked, infra = s.reason, s.blocked, s.infra
        except HarnessInvalidError as e:
            emit(
                InfrastructureFailed(
                    candidate_id=cid,
                    stage=p.stage,
                    kind=FailureKind.HARNESS_ERROR,
                    retryable=False,
                    diagnostics=e.message,
                )
            )
            reason = e.message
        except ChildGone as g:
            emit(
                InfrastructureFailed(
                    candidate_id=cid,
                    stage=p.stage,
                    kind=g.kind,
                    retryable=True,
                    diagnostics=g.detail,
                )
            )
            reason, infra = f"{g.kind.value} during {p.stage}", True
        finally:
            session.close()
            self._live.discard(session)
        changed = file_guard.changed_paths(
            before, file_guard.hash_paths(self.bundle.protected_paths)
        )
        for path in changed:
            emit(
                IntegrityFlagged(
                    candidate_id=cid,
                    guard="files:changed",
                    detail=f"the candidate changed protected file {path}",
                    blocking=True,
                )
            )
        if changed:
            blocked, reason = True, f"the candidate changed protected file {changed[0]}"
        return EvalSummary(
            candidate_id=cid,
            built=p.built,
            verified=p.verified and not reason,
            benchmarked=p.benchmarked,
            blocked_by_guard=blocked,
            infrastructure_failure=infra,
            reason=reason,
        )
