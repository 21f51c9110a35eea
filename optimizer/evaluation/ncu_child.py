"""ncu on CUDA targets with no harness code: a harness child started under ncu, ready in advance.

Invariants:
- The child runs under `ncu --clock-control none --profile-from-start off` with a kernel filter
  (the main kernel of the launch attribution) and profiles exactly one launch per case, over
  `verify` calls (one launch each, and far shorter than a benchmark under ncu;
  optimizer.evaluation.child's `ncu_range`): the first launch of a range when `begin` already
  verified that case in the child (its warm-up launch), else the one after WARMUP_LAUNCHES
  launches. Benchmark samples are never taken under ncu.
- ncu writes its results when the program ends, so every candidate gets a child of its own. What
  would dominate (starting Python, importing torch, triton and the harness under ncu) is paid off
  the critical path: the next candidate's child is started when a candidate's last benchmark
  sample is taken (`prestart`, beside the evaluator's own next child), and loads while this
  candidate is attributed, profiled, decided and the next one proposed. It touches the GPU only
  once the profile before it is done (`_Child.release`: its CUDA context), so nothing of it runs
  beside another child's ncu range. The loop hands it the candidate's source when that
  candidate's evaluation starts (`begin`: it builds and verifies every case once, so the kernel
  is compiled and every module loaded) and waits for it (`settle`) before that candidate's
  benchmark: nothing of it overlaps a benchmark sample.
- A metric this GPU or ncu does not know ("Failed to find metric") is dropped from later runs and
  recorded as null with a diagnostic; the run that met it is repeated once without it.
- Every profiled case becomes one ProfileCollected event with source "ncu"; the wall time the
  profile cost (PROFILING_WALL) is in it, never in a benchmark sample.
- Once the baseline is profiled it is the run's reference (`BaselineKernel`): every later child
  builds the baseline's source too, warms it, and profiles one launch of the baseline's main
  kernel right after the candidate's on each case, in the same process. Its duration travels on
  the candidate's event as ncu.REFERENCE_DURATION, so the ncu veto compares two launches made
  milliseconds apart in one process, not each candidate with the one launch of the baseline's
  own profile (a draw every decision of the run shares). One launch a side still varies: on an
  H100 A/A run the ratio spanned 0.975-1.043 on a 13 us kernel
  (benchmarks/results/h100_ncu_pairing_2026-12-05), launch-to-launch as much as between
  processes. These reference launches, one per candidate, are also what sets the veto's bar
  (optimizer.decision.kernel.veto_bar); several alternated launches a side would narrow it.
  The baseline's own profile takes a second launch of its kernel right after the first, recorded
  the same way, so that the bar has three launches at the first candidate: with two, it was 1%
  alone, and on an H100 A/A run an unchanged first candidate was vetoed at +2.1% on a 12 us case
  (benchmarks/results/h100_noise_2026-12-05).
  A reference that fails to build or launch leaves the candidate's own profile as it was.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from optimizer.bundle.spec import CaseSpec
from optimizer.decision.kernel import Level
from optimizer.evaluation.attribution import PROFILING_WALL
from optimizer.evaluation.evaluator import PRESTART_DEADLINE_S, Evaluator
from optimizer.evaluation.session import ChildGone, Session, tail
from profilers import ncu
from tlxstore.events import ProfileCollected, ProfileMetric

SOURCE = "ncu"
WARMUP_LAUNCHES = 1
CHILD_WALL = "ncu_child_wall_ms"  # the whole profile of one candidate, all cases, start to end
SETTLE_TIMEOUT_S = 300.0  # a prestarted child that has not loaded and built by then is dropped


METRICS = {Level.SUMMARY: ncu.SUMMARY_METRICS, Level.DEEP: ncu.DEEP_METRICS}


@dataclass(frozen=True)
class BaselineKernel:
    """The run's baseline as each ncu child profiles it beside a candidate."""

    source: str
    kernel: str  # its main kernel


@dataclass
class NcuResult:
    """What one candidate's ncu child gave: an event per case, and what stopped it, if anything."""

    events: list[ProfileCollected] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # metrics ncu does not know here
    diagnostics: list[str] = field(default_factory=list)
    wall_ms: float = 0.0  # the profile itself: its ranges, and ncu writing its results
    settle_ms: float = 0.0  # how long the candidate's evaluation waited for the child before


class _Child:
    """One harness child under ncu: started, loading the harness, waiting for its candidate."""

    def __init__(
        self,
        ev: Evaluator,
        ncu_path: str,
        kernel: str,
        level: Level,
        metrics: list[str],
        reference: BaselineKernel | None = None,
    ) -> None:
        self.ev, self.kernel, self.level, self.metrics = ev, kernel, level, metrics
        self.reference = reference
        self.logdir = Path(tempfile.mkdtemp(prefix="tlxdb-ncu-"))
        self.log = self.logdir / "ncu.csv"
        names = dict.fromkeys([kernel, *([reference.kernel] if reference else [])])
        wrapper = ncu.prefix(
            self.log,
            metrics,
            kernel_regex="^(" + "|".join(map(re.escape, names)) + ")$"
            if len(names) > 1
            else f"^{re.escape(kernel)}$",
            ncu=ncu_path,
            profile_from_start=False,
        )
        self.session = Session(
            ev.bundle,
            ev.python,
            time.monotonic() + PRESTART_DEADLINE_S,
            ev._child_env(),
            wrapper=wrapper,
        )
        self.session.send(ev._load_message())
        self.pending: list[str] = ["load"]  # replies asked for and not yet read
        self.released = False  # whether it may touch the GPU (its CUDA context made)
        self.failed = ""  # why the child cannot profile, once known
        self.built: str | None = None  # the source the child has built
        self.warmed: set[str] = set()  # cases verified once since the build (warm-up launch)
        self.paired = False  # whether the reference is built beside the candidate
        self.again = False  # whether this is the reference itself: a second launch follows its own
        self.ref_warmed: set[str] = set()  # the same for the reference
        self.ref_failed = ""  # why the reference cannot be profiled beside the candidate
        self.waited_ms = 0.0  # how long the loop waited for it before the benchmark

    def release(self) -> None:
        """The GPU is free of other ncu work: make the CUDA context now."""
        if not self.released:
            self.released = True
            self.session.send({"op": "warm"})
            self.pending.append("warm")

    def begin(self, source: str) -> None:
        """Build the candidate and verify each case once (compile, load every module), while
        the candidate's own evaluation verifies: not on the critical path."""
        self.release()
        self.session.send(
            {"op": "build", "key": "A", "source": source, "target": self.ev.bundle.target}
        )
        self.pending.append("build")
        self.built = source
        self.warmed, self.ref_warmed = set(), set()
        self._verify_all("A", "verify")
        ref = self.reference
        self.paired = ref is not None and ref.source != source and not self.ref_failed
        self.again = ref is not None and ref.source == source
        if self.paired:
            assert ref is not None
            self.session.send(
                {"op": "build", "key": "B", "source": ref.source, "target": self.ev.bundle.target}
            )
            self.pending.append("build_ref")
            self._verify_all("B", "verify_ref")

    def _verify_all(self, key: str, label: str) -> None:
        for case in self.ev.bundle.cases:
            self.session.send(
                {
                    "op": "verify",
                    "key": key,
                    "case": case.model_dump(mode="json"),
                    "seed": self.ev._seed(),
                }
            )
            self.pending.append(f"{label}:{case.case_id}")

    def settle(self, timeout_s: float) -> None:
        """Read every reply asked for; raises ChildGone when the child died or hung."""
        t0 = time.monotonic()
        self.session.deadline = t0 + timeout_s
        try:
            while self.pending:
                what = self.pending.pop(0)
                reply = self.session.receive()
                if what.startswith("verify:"):
                    if reply.get("ok"):  # passed or not: the kernel has launched once
                        self.warmed.add(what.split(":", 1)[1])
                elif what.startswith("verify_ref:"):
                    if reply.get("ok"):
                        self.ref_warmed.add(what.split(":", 1)[1])
                elif what == "build_ref":
                    if not reply.get("ok") or not reply.get("success"):
                        self.paired = False
                        self.ref_failed = "the baseline's build failed in this child: " + tail(
                            str(reply.get("diagnostics") or reply.get("error")), 300
                        )
                elif what == "build" and (not reply.get("ok") or not reply.get("success")):
                    self.built = None
                    self.failed = "the build failed: " + tail(
                        str(reply.get("diagnostics") or reply.get("error")), 300
                    )
                elif not reply.get("ok"):
                    self.failed = f"{what} failed: {reply.get('error')}"
        finally:
            self.waited_ms += (time.monotonic() - t0) * 1e3

    def alive(self) -> bool:
        return self.session.proc.poll() is None

    def discard(self) -> None:
        self.session.kill()
        self.session.close()
        shutil.rmtree(self.logdir, ignore_errors=True)

    def _range(self, case: CaseSpec, reference: bool = False) -> dict[str, Any]:
        """One case's ncu range: one launch profiled, after a warm-up launch of the kernel (the
        candidate's, or with `reference` the baseline's)."""
        warmed, kernel = self.warmed, self.kernel
        if reference:
            assert self.reference is not None
            warmed, kernel = self.ref_warmed, self.reference.kernel
        skip = 0 if case.case_id in warmed else WARMUP_LAUNCHES
        reply = self.session.call(
            {
                "op": "ncu_range",
                "key": "B" if reference else "A",
                "case": case.model_dump(mode="json"),
                "kernel": kernel,
                "skip": skip,
                "mode": "verify",  # one launch a call
                "calls": skip + 1,
            }
        )
        return {**reply, "launch": WARMUP_LAUNCHES + 1 if skip == 0 else skip + 1}

    def _second(self, case: CaseSpec) -> dict[str, Any] | None:
        """The baseline's kernel right after the one profiled: beside a candidate, the baseline's
        own build; in the baseline's own profile, a second launch of it, so that the veto's bar
        knows the launch-to-launch noise from the first candidate on (module doc)."""
        if self.paired:
            return self._range(case, reference=True)
        return self._range(case) if self.again else None

    def profile(
        self,
        cid: str,
        source: str,
        cases: list[CaseSpec],
        timeout_s: float,
        keep_dir: Path | None,
    ) -> NcuResult:
        t0 = time.monotonic()
        s = self.session
        s.deadline = t0 + timeout_s
        out = NcuResult(settle_ms=self.waited_ms)
        ranges: list[tuple[CaseSpec, dict[str, Any], dict[str, Any] | None]] = []
        try:
            if self.built != source:
                self.begin(source)
            self.settle(timeout_s)
            s.deadline = t0 + timeout_s
            if self.failed:
                out.diagnostics.append(f"ncu child: {self.failed}")
                return out
            for case in cases:
                mine = self._range(case)
                ranges.append((case, mine, self._second(case)))
        except ChildGone as g:
            out.diagnostics.append(f"ncu child: {g.kind.value}: {tail(g.detail, 300)}")
        finally:
            s.close()  # the program ends: ncu writes its results
            out.wall_ms = (time.monotonic() - t0) * 1e3
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        out.missing = ncu.missing_metrics(s.final_log + "\n" + text)
        artifacts = []
        if keep_dir is not None and self.log.exists():
            keep_dir.mkdir(parents=True, exist_ok=True)
            kept = keep_dir / f"ncu-{self.level.value}.csv"
            shutil.copyfile(self.log, kept)
            artifacts.append(str(kept.resolve()))
        shutil.rmtree(self.logdir, ignore_errors=True)
        report = ncu.parse_csv(text) if text else ncu.NcuReport(diagnostics=["ncu: no log"])
        launches = iter(report.launches)
        for case, reply, ref_reply in ranges:
            out.events.append(
                self._event(cid, case, reply, ref_reply, launches, report, artifacts, out)
            )
        return out

    def _event(
        self,
        cid: str,
        case: CaseSpec,
        reply: dict[str, Any],
        ref_reply: dict[str, Any] | None,
        launches: Any,
        report: ncu.NcuReport,
        artifacts: list[str],
        out: NcuResult,
    ) -> ProfileCollected:
        head = f"ncu {self.level.value} set: launch {reply.get('launch')} of {self.kernel}"
        diagnostics = [head, *out.diagnostics]
        launch = next(launches, None) if reply.get("ok") and reply.get("profiled") else None
        ref_launch = None
        if ref_reply is not None and ref_reply.get("ok") and ref_reply.get("profiled"):
            ref_launch = next(launches, None)
        if self.reference is not None and self.reference.source != self.built:
            diagnostics.append(self._reference_line(ref_reply, ref_launch))
        elif self.again and ref_launch is not None:
            diagnostics.append(f"a second launch of {self.kernel} profiled right after it")
        if not reply.get("ok"):
            diagnostics.append(f"ncu child: {reply.get('error')}")
        elif not reply.get("profiled"):
            diagnostics.append(f"ncu child: {reply.get('reason')}")
        if launch is None:
            diagnostics += report.diagnostics or ["ncu: no launch was profiled"]
            summary = ncu.NcuReport().summary(self.metrics)
        else:
            summary = ncu.NcuReport(launches=[launch]).summary(self.metrics)
        diagnostics += [d for d in summary.diagnostics if d not in diagnostics]
        metrics = [
            ProfileMetric(name=m.name, value=m.value, unit=m.unit, source=SOURCE)
            for m in summary.metrics
        ]
        metrics.append(
            ProfileMetric(name=PROFILING_WALL, value=reply.get("wall_ms"), unit="ms", source=SOURCE)
        )
        metrics.append(ProfileMetric(name=CHILD_WALL, value=out.wall_ms, unit="ms", source=SOURCE))
        if ref_launch is not None and launch is not None:
            ref = ncu.NcuReport(launches=[ref_launch]).summary([ncu.DURATION]).metrics[0]
            metrics.append(
                ProfileMetric(
                    name=ncu.REFERENCE_DURATION, value=ref.value, unit=ref.unit, source=SOURCE
                )
            )
        return ProfileCollected(
            candidate_id=cid,
            case_id=case.case_id,
            metrics=metrics,
            kernel_names=[launch.kernel if launch is not None else self.kernel],
            diagnostics="\n".join(diagnostics),
            artifacts=artifacts,
        )

    def _reference_line(self, reply: dict[str, Any] | None, launch: Any) -> str:
        """How the baseline's kernel fared beside the candidate in this child."""
        assert self.reference is not None
        if launch is not None:
            return f"baseline's {self.reference.kernel} profiled right after it in this process"
        if reply is None:
            why = self.ref_failed or "the child ended first"
        elif not reply.get("ok"):
            why = str(reply.get("error"))
        else:
            why = str(reply.get("reason") or "ncu reported no launch for it")
        return f"baseline's {self.reference.kernel} not profiled in this process: {why}"


class NcuProfiler:
    """ncu for one run: a child per candidate, prestarted, summary or deep set.

    Two children at most: the one the candidate under evaluation has begun (`_current`) and the
    one prestarted for the next candidate (`_next`)."""

    def __init__(self, evaluator: Evaluator, ncu_command: str = "ncu") -> None:
        self.ev = evaluator
        self.ncu_path = shutil.which(ncu_command)
        self.unsupported: list[str] = []
        self.kernel: str | None = None  # the main kernel last profiled: the next child's filter
        self.reference: BaselineKernel | None = None  # the baseline, once profiled (module doc)
        self._current: _Child | None = None
        self._next: _Child | None = None

    def unavailable(self) -> str | None:
        """Why ncu cannot profile this bundle's kernels (None: it can)."""
        backend = str(self.ev.bundle.target.get("backend", "")).lower()
        if backend != "cuda":
            return f"ncu is unavailable on this target (backend {backend or 'unknown'})"
        if self.ncu_path is None:
            return "ncu is unavailable on this target: ncu is not on PATH"
        return None

    def _metrics(self, level: Level) -> list[str]:
        return [m for m in METRICS[level] if m not in self.unsupported]

    def _new(self, kernel: str, level: Level) -> _Child:
        assert self.ncu_path is not None
        return _Child(self.ev, self.ncu_path, kernel, level, self._metrics(level), self.reference)

    def _child(self, kernel: str, level: Level, source: str) -> _Child:
        """The child begun with this candidate if it fits; else the prestarted one if it fits
        (a parallel run begins none), else a fresh one. Released: no other range runs now."""
        child, self._current = self._current, None
        if child is not None and (child.kernel, child.level, child.built, child.reference) == (
            kernel,
            level,
            source,
            self.reference,
        ):
            return child
        if child is not None:
            child.discard()
        nxt = self._next
        if (
            nxt is not None
            and (nxt.kernel, nxt.level, nxt.reference) == (kernel, level, self.reference)
            and nxt.alive()
        ):
            child, self._next = nxt, None
        else:
            child = self._new(kernel, level)
        child.release()
        return child

    def prestart(self) -> None:
        """Start the child the next candidate will most likely need: it loads the harness and
        touches no GPU until released. Called once a candidate's last sample is taken."""
        if self.unavailable() is None and self._next is None and self.kernel is not None:
            self._next = self._new(self.kernel, Level.SUMMARY)

    def begin(self, source: str) -> None:
        """Hand the candidate's source to the prestarted child, which builds it at once."""
        if self._current is not None:
            self._current.discard()
        child, self._next = self._next, None
        if child is not None and not child.alive():  # it could not start: profile() starts one
            child.discard()
            child = None
        self._current = child
        if child is not None:
            try:
                child.begin(source)
            except ChildGone:
                self._current = None
                child.discard()

    def settle(self, timeout_s: float = SETTLE_TIMEOUT_S) -> None:
        """Wait until the begun child has done what it was asked (called before the
        candidate's benchmark, so no profiling work overlaps a benchmark sample)."""
        child = self._current
        if child is None:
            return
        try:
            child.settle(timeout_s)
        except ChildGone:
            self._current = None
            child.discard()

    def skip(self) -> None:
        """The candidate begun gets no ncu profile: its child ends, the next may use the GPU."""
        child, self._current = self._current, None
        if child is not None:
            child.discard()
        if self._next is not None:
            self._next.release()

    def profile(
        self,
        cid: str,
        source: str,
        cases: list[CaseSpec],
        kernel: str,
        level: Level,
        timeout_s: float,
        keep_dir: Path | None = None,
        baseline: bool = False,
    ) -> NcuResult:
        """Profile one candidate's cases. The baseline's profile (`baseline`) makes it the
        reference every later child profiles beside its candidate."""
        self.kernel = kernel
        if baseline:
            self.reference = BaselineKernel(source=source, kernel=kernel)
        child = self._child(kernel, level, source)
        self.prestart()  # a cold profile (the baseline's) takes seconds: the next child loads meanwhile
        result = child.profile(cid, source, cases, timeout_s, keep_dir)
        if result.missing:
            self.unsupported += [m for m in result.missing if m not in self.unsupported]
            if not any(e.metrics and e.metrics[0].value is not None for e in result.events):
                retry = self._child(kernel, level, source).profile(
                    cid, source, cases, timeout_s, keep_dir
                )
                retry.wall_ms += result.wall_ms
                result = retry
            note = "; ".join(f"{m} is not supported by this GPU or ncu" for m in self.unsupported)
            result.events = [
                e.model_copy(
                    update={
                        "metrics": [
                            *e.metrics,
                            *(
                                ProfileMetric(name=m, value=None, unit="", source=SOURCE)
                                for m in self.unsupported
                                if m in METRICS[level] and all(x.name != m for x in e.metrics)
                            ),
                        ],
                        "diagnostics": e.diagnostics + "\n" + note,
                    }
                )
                for e in result.events
            ]
        self.skip()  # the profile is done: the next child may use the GPU (or start now)
        self.prestart()
        return result

    def close(self) -> None:
        for child in (self._current, self._next):
            if child is not None:
                with contextlib.suppress(Exception):
                    child.discard()
        self._current = self._next = None
