"""The evaluator: runs a candidate through the harness in a child process and emits the evidence.

Invariants:
- The harness and the candidate only ever run in the child (`python -m optimizer.evaluation.child`), in its
  own process group, with the bundle's environment applied to the child alone. tlxdb's process
  never imports either.
- Commands travel to the child over one pipe and replies come back as JSON lines over another;
  the child's stdout/stderr (which the harness may print to) go to a log whose tail becomes
  diagnostics.
- Every result becomes an event handed to `emit` as it happens (BuildFinished, CaseVerified,
  BenchmarkSampled, ProfileCollected, IntegrityFlagged, InfrastructureFailed).
- A timeout kills the whole process group (InfrastructureFailed TIMEOUT, retryable); a child that
  dies is a CRASH (retryable); a harness that raises is a failed build/verification or a
  HARNESS_ERROR (not retryable). Nothing the harness does raises out of `evaluate`.
- Guards (optimizer.evaluation.guards): static checks before the child starts; the child reports replaced
  functions after every call; the protected files are hashed before and after; implausible
  measurements trigger extra verification and a re-benchmark.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import os
import re
import secrets
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from optimizer.bundle.spec import CaseSpec
from optimizer.decision import machine, stats
from optimizer.evaluation import attribution, window
from optimizer.evaluation.guards import files as file_guard
from optimizer.evaluation.guards import static as static_guard
from optimizer.evaluation.guards import tripwire
from optimizer.evaluation.requests import EvalRequest, EvalSummary, HarnessBundle
from tlxstore.config import settings
from tlxstore.errors import TlxdbError
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
    ProfilingFinished,
    remeasure_window,
)
from tlxstore.redaction import without_secrets

Emit = Callable[[Event], None]

POLL_S = 1.0  # how often a wait on the child checks that it is still alive
DIAGNOSTICS_TAIL_CHARS = 4000  # the tail of a traceback or child log kept as evidence
EXTRA_VERIFICATIONS = 2  # verifications per case added when a tripwire fires
PROFILE_SOURCES = ("proton", "ncu", "harness")
PRESTART_DEADLINE_S = 24 * 3600.0  # a prestarted child waits for its candidate at most this long


class HarnessInvalidError(TlxdbError):
    """The harness cannot be used: it lacks build/verify/benchmark or raises when imported."""


class _ChildGone(Exception):
    def __init__(self, kind: FailureKind, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


class _Stop(Exception):
    """The evaluation ends early (the reason was already emitted)."""

    def __init__(self, reason: str, *, blocked: bool = False, infra: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.blocked = blocked
        self.infra = infra


def tail(text: str, limit: int = DIAGNOSTICS_TAIL_CHARS) -> str:
    """The last `limit` characters of `text` (diagnostics keep the end of a traceback)."""
    return text if len(text) <= limit else "..." + text[-limit:]


class _Session:
    """One child process: send a command, wait for its one-line reply, within a deadline."""

    def __init__(
        self,
        bundle: HarnessBundle,
        python: str,
        deadline: float,
        env: dict[str, str],
        wrapper: list[str] | None = None,
    ):
        """`wrapper`: a command the child runs under (ncu); the pipes are then two FIFOs in
        the child's folder, since a wrapper may not hand descriptors through."""
        self.deadline = deadline
        self.workdir = Path(tempfile.mkdtemp(prefix="tlxdb-child-"))
        self.log_path = self.workdir / "child.log"
        child = [python, "-m", "optimizer.evaluation.child"]
        if wrapper:
            req_path, rep_path = self.workdir / "requests.fifo", self.workdir / "replies.fifo"
            os.mkfifo(req_path)
            os.mkfifo(rep_path)
            # Both ends read-write: opening never blocks, whenever the child opens its ends.
            self.req_w = os.open(req_path, os.O_RDWR)
            self.rep_r = os.open(rep_path, os.O_RDWR | os.O_NONBLOCK)
            argv = [*wrapper, *child, str(req_path), str(rep_path)]
            keep: tuple[int, ...] = ()
        else:
            req_r, self.req_w = os.pipe()
            self.rep_r, rep_w = os.pipe()
            argv, keep = [*child, str(req_r), str(rep_w)], (req_r, rep_w)
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                argv,
                pass_fds=keep,
                start_new_session=True,
                env=env,
                cwd=self.workdir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        for fd in keep:
            os.close(fd)
        self.buffer = b""
        self.closed = False
        self.final_log = ""
        self.load_sent = False  # a prestarted child: its load reply is still to be read

    def log_tail(self) -> str:
        try:
            return tail(self.log_path.read_text(errors="replace"))
        except OSError:
            return ""

    def call(self, msg: dict[str, Any]) -> dict[str, Any]:
        self.send(msg)
        return self.receive()

    def send(self, msg: dict[str, Any]) -> None:
        data = (json.dumps(msg) + "\n").encode()
        try:
            view = memoryview(data)
            while view:
                self._wait(write=True)
                n = os.write(self.req_w, view)
                view = view[n:]
        except OSError:
            raise self._gone() from None

    def receive(self) -> dict[str, Any]:
        while b"\n" not in self.buffer:
            self._wait(write=False)
            chunk = os.read(self.rep_r, 1 << 16)
            if not chunk:
                raise self._gone()
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        try:
            reply = json.loads(line)
        except json.JSONDecodeError:
            raise _ChildGone(
                FailureKind.CRASH, "the harness child wrote a malformed reply"
            ) from None
        if not isinstance(reply, dict):
            raise _ChildGone(FailureKind.CRASH, "the harness child wrote a malformed reply")
        return reply

    def _wait(self, *, write: bool) -> None:
        fd = self.req_w if write else self.rep_r
        while True:
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                raise _ChildGone(FailureKind.TIMEOUT, "the evaluation ran past its time limit")
            step = min(remaining, POLL_S)
            ready = (
                select.select([], [fd], [], step) if write else select.select([fd], [], [], step)
            )
            if ready[1] if write else ready[0]:
                return
            if self.proc.poll() is not None:  # a FIFO never reads as closed: ask the process
                raise self._gone()

    def _gone(self) -> _ChildGone:
        try:
            rc = self.proc.wait(timeout=max(0.1, min(5.0, self.deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            self.kill()
            rc = self.proc.returncode
        log = self.log_tail()
        if rc is not None and rc < 0:
            name = (
                signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else str(-rc)
            )
            return _ChildGone(
                FailureKind.CRASH, tail(f"the harness child died of signal {name}\n{log}")
            )
        return _ChildGone(
            FailureKind.CRASH, tail(f"the harness child exited with status {rc}\n{log}")
        )

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                os.write(self.req_w, b'{"op": "exit"}\n')
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=max(0.5, min(10.0, self.deadline - time.monotonic())))
        # Whatever the child left behind in its group (threads are gone with it; processes not).
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        if self.proc.poll() is None:
            self.proc.wait()
        self.final_log = self.log_tail()  # what the child (or its wrapper) printed, kept
        for fd in (self.req_w, self.rep_r):
            with contextlib.suppress(OSError):
                os.close(fd)
        for p in sorted(self.workdir.rglob("*"), reverse=True):
            with contextlib.suppress(OSError):
                p.unlink() if not p.is_dir() or p.is_symlink() else p.rmdir()
        with contextlib.suppress(OSError):
            self.workdir.rmdir()


def _profile_metrics(
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


class Evaluator:
    """Runs candidates through one frozen bundle's harness, each in a fresh child process.

    `python`: the child's interpreter (default TLXDB_CHILD_PYTHON, else this one).
    `peak_*`: hardware ceilings for the throughput tripwire (None: not judged).
    `seed_source`: where verification seeds come from (default: fresh random 62-bit seeds).
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
    ) -> None:
        self.bundle = bundle
        self.python = python or settings().child_python or sys.executable
        self.static_checks = static_checks
        self.snapshot_checks = snapshot_checks
        self.trusted_source = trusted_source
        self.peak_bandwidth_bytes_per_s = peak_bandwidth_bytes_per_s
        self.peak_flops_per_s = peak_flops_per_s
        self._seed = seed_source or (lambda: secrets.randbits(62))
        self.pin: dict[str, str] = {}  # set on the children of one device (`pinned`)
        self._live: set[_Session] = set()  # children running now, shared with pinned copies
        self.keep_ready = False  # start the next candidate's child once a benchmark is done
        self._ready: _Session | None = None  # that child: started, loading the harness

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
        except _ChildGone:
            session.close()
            self._live.discard(session)
            return
        session.load_sent = True
        self._ready = session

    def _take_ready(self, timeout_s: float) -> _Session | None:
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

    def _start(self, timeout_s: float) -> _Session:
        session = _Session(
            self.bundle, self.python, time.monotonic() + timeout_s, self._child_env()
        )
        self._live.add(session)
        return session

    def _load_message(self) -> dict[str, Any]:
        return {
            "op": "load",
            "bundle_root": str(self.bundle.root),
            "harness_file": self.bundle.harness_file,
        }

    def _load(self, session: _Session) -> dict[str, Any]:
        if session.load_sent:
            session.load_sent = False
            reply = session.receive()
        else:
            reply = session.call(self._load_message())
        if not reply.get("ok"):
            raise HarnessInvalidError(
                f"{self.bundle.harness_file}: {reply.get('error')}"
                + (f": {_last_line(reply['traceback'])}" if reply.get("traceback") else "")
            )
        return reply

    def check_harness(self, timeout_s: float = 120.0) -> None:
        """Import the harness in a child; raise HarnessInvalidError when it cannot be used."""
        session = self._start(timeout_s)
        try:
            self._load(session)
        except _ChildGone as e:
            raise HarnessInvalidError(
                f"{self.bundle.harness_file}: loading it failed: {_last_line(e.detail)}"
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
    ) -> EvalSummary:
        """Build, verify (repeatedly, fresh seeds), benchmark, verify again, profile; emit events.
        `before_benchmark` runs once the candidate verified, right before its first sample (the
        loop waits there for work of its own that must not overlap a sample); `after_benchmark`
        once its last sample is taken (the loop may start work of its own from there on)."""
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

        def body(session: _Session, loaded: dict[str, Any], p: _Progress) -> None:
            run = _Run(self, session, cid, req.phase, emit, window_id=cid)
            if not run.build("A", req.source):
                raise _Stop("build failed")
            p.built = True
            p.stage = "verify"
            cases = run.verify_cases("A", self.bundle.cases, req.verify_repeats, first_attempt=1)
            p.verified = True
            p.stage = "build"
            members = [(run, "A"), *self._references(session, req, emit)]
            p.stage = "benchmark"
            if before_benchmark is not None:
                before_benchmark()
            medians = _measure_window(members, cases, req, warm_up=True)
            p.benchmarked = True
            p.stage = "verify"
            run.verify_cases("A", cases, 1, first_attempt=req.verify_repeats + 1)
            self._tripwires(members, cases, req, medians, p)
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
        members: list[tuple[_Run, str]],
        cases: list[CaseSpec],
        req: EvalRequest,
        medians: dict[str, float],
        p: _Progress,
    ) -> None:
        """An implausible measurement (optimizer.evaluation.guards.tripwire) is flagged, verified
        EXTRA_VERIFICATIONS more times and measured again in a second window."""
        run = members[0][0]
        fired = tripwire.check(
            medians,
            req.parent_medians_us,
            run.declared,
            self.peak_bandwidth_bytes_per_s,
            self.peak_flops_per_s,
        )
        if not fired:
            return
        for t in fired:
            run.emit(
                IntegrityFlagged(
                    candidate_id=run.cid, guard=t.guard, detail=t.detail, blocking=False
                )
            )
        run.verify_cases("A", cases, EXTRA_VERIFICATIONS, first_attempt=req.verify_repeats + 2)
        p.stage = "benchmark"
        again = [(r.in_window(remeasure_window(run.cid)), key) for r, key in members]
        _measure_window(again, cases, req)

    def _references(
        self, session: _Session, req: EvalRequest, emit: Emit
    ) -> list[tuple[_Run, str]]:
        """The request's references built in the child (keys R1, R2, ...), in its window. A
        reference that does not build here (it built when it was evaluated) ends the evaluation
        as a harness error."""
        out = []
        for i, ref in enumerate(req.references, start=1):
            key = f"R{i}"
            run = _Run(self, session, ref.candidate_id, req.phase, emit, req.candidate_id)
            reply = run._call(
                {"op": "build", "key": key, "source": ref.source, "target": self.bundle.target}
            )
            if not reply.get("ok") or not reply.get("success"):
                detail = _last_line(str(reply.get("diagnostics") or reply.get("error") or ""))
                emit(
                    InfrastructureFailed(
                        candidate_id=req.candidate_id,
                        stage="build",
                        kind=FailureKind.HARNESS_ERROR,
                        retryable=False,
                        diagnostics=tail(
                            f"the reference {ref.candidate_id} did not build beside it: {detail}"
                        ),
                    )
                )
                raise _Stop(f"the reference {ref.candidate_id} did not build beside it")
            out.append((run, key))
        return out

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

        def body(session: _Session, loaded: dict[str, Any], p: _Progress) -> None:
            a = _Run(self, session, finalist_id, Phase.REVALIDATION, emit, wid)
            b = _Run(self, session, baseline_id, Phase.REVALIDATION, emit, wid)
            if not a.build("A", finalist_source):
                raise _Stop("the finalist failed to build")
            if not b.build("B", baseline_source):
                raise _Stop("the baseline failed to build")
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
            _measure_window([(a, "A"), (b, "B")], cases, plan, warm_up=True)
            p.benchmarked = True
            p.stage = "verify"
            a.verify_cases("A", cases, 1, first_attempt=2)

        return self._session(finalist_id, timeout_s, emit, body)

    # ---- one child, start to end -----------------------------------------------------------
    def _session(
        self,
        cid: str,
        timeout_s: float,
        emit: Emit,
        body: Callable[[_Session, dict[str, Any], _Progress], None],
    ) -> EvalSummary:
        """Run `body` in a fresh child; turn every way it can end into events and a summary, and
        check the protected files afterwards."""
        before = file_guard.hash_paths(self.bundle.protected_paths)
        p = _Progress()
        reason, blocked, infra = "", False, False
        session = self._take_ready(timeout_s) or self._start(timeout_s)
        try:
            loaded = self._load(session)
            body(session, loaded, p)
        except _Stop as s:
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
        except _ChildGone as g:
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


class _Progress:
    """How far an evaluation got, and the stage it is in (for failure events)."""

    def __init__(self) -> None:
        self.stage = "build"
        self.built = False
        self.verified = False
        self.benchmarked = False


def _last_line(text: str) -> str:
    lines = [ln for ln in str(text).strip().splitlines() if ln.strip()]
    return lines[-1].strip() if lines else ""


class _Run:
    """One candidate's commands within a session, turned into events."""

    def __init__(
        self,
        ev: Evaluator,
        session: _Session,
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
        self.declared: dict[str, tuple[int | None, int | None]] = {}  # case -> (bytes, flops)

    def in_window(self, window_id: str) -> _Run:
        """This candidate's commands, recorded in another window of the same child."""
        other = copy.copy(self)
        other.window_id = window_id
        return other

    def _call(self, msg: dict[str, Any]) -> dict[str, Any]:
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
            raise _Stop(f"the candidate replaced {patched[0]}", blocked=True)
        return reply

    def build(self, key: str, source: str) -> bool:
        reply = self._call(
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
                msg = {"op": "verify", "key": key, "case": _case_dict(case), "seed": seed}
                # the first verification says what the kernels are launched with; the baseline's
                # second, compiled by then, how long each one runs (which kernel tune takes first)
                observe = attempt == 1 or (attempt == 2 and self.cid == BASELINE_ID)
                reply = self._call({**msg, "observe": observe})
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
                raise _Stop(
                    f"protected case {case.case_id} failed verification (attempt {attempt})"
                )
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
        warm_up: bool = False,
        extra: bool = False,
    ) -> tuple[list[float], bool]:
        """One harness call benchmarking one case; its samples, and whether the call is marked
        (it ran while the GPU throttled or was shared: optimizer.decision.machine; the child
        samples NVML while the call runs, where it can). `warm_up`: first one call
        `benchmark(artifact, case, 1)` after the GPU idled through build and verification, its
        samples kept as `warmup_samples_us` and out of every statistic. Measured on the H200: a
        4096^3 fp16 GEMM's first do_bench after that idle ran 8-15% faster than every later one
        (boost clock before the power limit), one outlier in 5 samples that widened every
        confidence interval."""
        warm: list[float] = self._warm_up(key, case) if warm_up else []
        reply = self._call(
            {
                "op": "benchmark",
                "key": key,
                "case": _case_dict(case),
                "repetitions": repetitions,
                "machine": True,
            }
        )
        if not reply.get("ok"):
            detail = str(reply.get("error"))
            if reply.get("traceback"):
                detail += "\n" + str(reply["traceback"])
            self.emit(
                InfrastructureFailed(
                    candidate_id=self.cid,
                    stage="benchmark",
                    kind=FailureKind.HARNESS_ERROR,
                    retryable=False,
                    diagnostics=tail(f"case {case.case_id}: {detail}"),
                )
            )
            raise _Stop(
                f"the harness benchmark failed on case {case.case_id}: {_last_line(detail)}"
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
            **reply["machine"],
        )
        self.emit(state)
        return samples, bool(machine.marks(state))

    def _warm_up(self, key: str, case: CaseSpec) -> list[float]:
        """One `benchmark(artifact, case, 1)`; its samples, or [] where it fails (the
        benchmark proper then says why, if it fails too)."""
        reply = self._call(
            {"op": "benchmark", "key": key, "case": _case_dict(case), "repetitions": 1}
        )
        return [float(x) for x in reply["samples_us"]] if reply.get("ok") else []

    def attribute_cases(
        self, key: str, cases: list[CaseSpec], source: str, artifacts_dir: Path | None
    ) -> int:
        """Launch attribution under Proton, one extra harness call per case (see attribution):
        `benchmark(artifact, case, 1)`, or `verify` where that benchmark raises under Proton;
        returns how many cases got it."""
        own = attribution.kernel_functions(source)
        attributed = 0
        for case in cases:
            case_dir = (
                Path(artifacts_dir) / self.cid / case_folder(case.case_id)
                if artifacts_dir is not None
                else self.session.workdir / "proton" / case_folder(case.case_id)
            )
            case_dir.mkdir(parents=True, exist_ok=True)
            failed: list[str] = []  # why each harness call failed under Proton
            for mode in ("benchmark", "verify"):
                reply = self._call(
                    {
                        "op": "attribute",
                        "key": key,
                        "case": _case_dict(case),
                        "mode": mode,
                        "artifacts_dir": str(case_dir.resolve()),
                    }
                )
                if reply.get("ok"):
                    break
                failed.append(
                    f"{mode}: {reply.get('error')}"
                    + (f": {_last_line(reply['traceback'])}" if reply.get("traceback") else "")
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

    def profile_cases(
        self, key: str, cases: list[CaseSpec], profile_args: int, artifacts_dir: Path | None
    ) -> None:
        for case in cases:
            case_dir = (
                Path(artifacts_dir) / self.cid / case_folder(case.case_id)
                if artifacts_dir is not None
                else self.session.workdir / "profile" / case_folder(case.case_id)
            )
            case_dir.mkdir(parents=True, exist_ok=True)
            request = {
                "level": "summary",
                "tools": ["proton_launch", "native_profiler"],
                "experiment_id": self.cid,
                "artifacts_dir": str(case_dir.resolve()),
                "reason": "candidate evaluation",
                "diagnostic_only": False,
            }
            reply = self._call(
                {
                    "op": "profile",
                    "key": key,
                    "case": _case_dict(case),
                    "request": request,
                    "profile_args": profile_args,
                }
            )
            if not reply.get("ok"):
                detail = str(reply.get("error")) + (
                    f": {_last_line(reply['traceback'])}" if reply.get("traceback") else ""
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
            metrics, kernels, artifacts, diagnostics = _profile_metrics(reply["result"])
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


def _measure_window(
    members: list[tuple[_Run, str]],
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
    per case, marked calls left out (a case with none left is missing). `warm_up`: the window's
    first call is preceded by one warm-up call (benchmark_case)."""
    samples: dict[str, dict[str, list[float]]] = {run.cid: {} for run, _ in members}
    owed: dict[str, int] = {}  # case -> its marked calls not yet measured again
    warm = warm_up and bool(cases)

    def block(index: int, repetitions: int, block_cases: list[CaseSpec], extra: bool) -> None:
        nonlocal warm
        for case in block_cases:
            for run, key in window.order(members, index):
                got, was_marked = run.benchmark_case(
                    key, case, repetitions, block=index, warm_up=warm, extra=extra
                )
                warm = False
                if was_marked:
                    owed[case.case_id] = owed.get(case.case_id, 0) + 1
                else:
                    samples[run.cid].setdefault(case.case_id, []).extend(got)

    size = window.per_call(req.repetitions)
    turn = len(members)
    index = window.first_blocks(req.repetitions, turn)
    for b in range(index):
        block(b, size, cases, False)
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
    own = members[0][0].cid
    return {case: stats.median(s) for case, s in samples[own].items() if s}


def case_folder(case_id: str) -> str:
    """A case's folder name under an artifacts dir: the case id when it is a plain file name,
    else its safe characters and a short digest of the id (no "/" or ".." ever leaves the dir)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", case_id).strip("._-")[:80] or "case"
    if safe == case_id:
        return safe
    return f"{safe}-{hashlib.sha256(case_id.encode()).hexdigest()[:8]}"


def _case_dict(case: CaseSpec) -> dict[str, Any]:
    """The case as cases.json gave it (handed to the harness unchanged)."""
    return case.model_dump(mode="json")
