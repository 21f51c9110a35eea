"""ncu on CUDA targets with no harness code: a harness child started under ncu, ready in advance.

Invariants:
- The child runs under `ncu --clock-control none --profile-from-start off` with a kernel filter
  (the main kernel of the launch attribution) and profiles exactly one launch per case: the one
  after WARMUP_LAUNCHES launches of the main kernel, over `verify` calls (one launch each, and
  far shorter than a benchmark under ncu; optimizer.evaluation.child's `ncu_range`). Benchmark
  samples are never taken under ncu.
- ncu writes its results when the program ends, so every candidate gets a child of its own. What
  would dominate (starting Python, importing torch, triton and the harness, creating the CUDA
  context under ncu, building the candidate) is paid off the critical path: the next child is
  started, loads the harness and creates its context as soon as the previous one is done; the
  loop hands it the next candidate's source when that candidate's evaluation starts (`begin`)
  and waits for it (`settle`) before that candidate's benchmark: nothing of it overlaps a
  benchmark sample.
- A metric this GPU or ncu does not know ("Failed to find metric") is dropped from later runs and
  recorded as null with a diagnostic; the run that met it is repeated once without it.
- Every profiled case becomes one ProfileCollected event with source "ncu"; the wall time the
  profile cost (PROFILING_WALL) is in it, never in a benchmark sample.
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
from optimizer.evaluation.evaluator import Evaluator, _ChildGone, _Session, tail
from profilers import ncu
from tlxstore.events import ProfileCollected, ProfileMetric

SOURCE = "ncu"
WARMUP_LAUNCHES = 1
PRESTART_DEADLINE_S = 24 * 3600.0  # a prestarted child waits for its candidate at most this long
CHILD_WALL = "ncu_child_wall_ms"
SETTLE_TIMEOUT_S = 300.0  # a prestarted child that has not loaded and built by then is dropped  # the whole profile of one candidate, all cases, start to end


METRICS = {Level.SUMMARY: ncu.SUMMARY_METRICS, Level.DEEP: ncu.DEEP_METRICS}


@dataclass
class NcuResult:
    """What one candidate's ncu child gave: an event per case, and what stopped it, if anything."""

    events: list[ProfileCollected] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # metrics ncu does not know here
    diagnostics: list[str] = field(default_factory=list)
    wall_ms: float = 0.0


class _Child:
    """One harness child under ncu: started, loading the harness, waiting for its candidate."""

    def __init__(
        self, ev: Evaluator, ncu_path: str, kernel: str, level: Level, metrics: list[str]
    ) -> None:
        self.ev, self.kernel, self.level, self.metrics = ev, kernel, level, metrics
        self.logdir = Path(tempfile.mkdtemp(prefix="tlxdb-ncu-"))
        self.log = self.logdir / "ncu.csv"
        wrapper = ncu.prefix(
            self.log,
            metrics,
            kernel_regex=f"^{re.escape(kernel)}$",
            ncu=ncu_path,
            profile_from_start=False,
        )
        self.session = _Session(
            ev.bundle,
            ev.python,
            time.monotonic() + PRESTART_DEADLINE_S,
            ev._child_env(),
            wrapper=wrapper,
        )
        self.session.send(
            {
                "op": "load",
                "bundle_root": str(ev.bundle.root),
                "harness_file": ev.bundle.harness_file,
            }
        )
        self.session.send({"op": "warm"})
        self.pending = ["load", "warm"]  # replies asked for and not yet read
        self.failed = ""  # why the child cannot profile, once known
        self.built: str | None = None  # the source the child has built

    def begin(self, source: str) -> None:
        """Build the candidate now (while its evaluation verifies), not on the critical path."""
        self.session.send(
            {"op": "build", "key": "A", "source": source, "target": self.ev.bundle.target}
        )
        self.pending.append("build")
        self.built = source

    def settle(self, timeout_s: float) -> None:
        """Read every reply asked for; raises _ChildGone when the child died or hung."""
        self.session.deadline = time.monotonic() + timeout_s
        while self.pending:
            what = self.pending.pop(0)
            reply = self.session.receive()
            if what == "build" and (not reply.get("ok") or not reply.get("success")):
                self.built = None
                self.failed = "the build failed: " + tail(
                    str(reply.get("diagnostics") or reply.get("error")), 300
                )
            elif not reply.get("ok"):
                self.failed = f"{what} failed: {reply.get('error')}"

    def discard(self) -> None:
        self.session.kill()
        self.session.close()
        shutil.rmtree(self.logdir, ignore_errors=True)

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
        out = NcuResult()
        ranges: list[tuple[CaseSpec, dict[str, Any]]] = []
        try:
            if self.built != source:
                self.begin(source)
            self.settle(timeout_s)
            s.deadline = t0 + timeout_s
            if self.failed:
                out.diagnostics.append(f"ncu child: {self.failed}")
                return out
            for case in cases:
                reply = s.call(
                    {
                        "op": "ncu_range",
                        "key": "A",
                        "case": case.model_dump(mode="json"),
                        "kernel": self.kernel,
                        "skip": WARMUP_LAUNCHES,
                        "mode": "verify",  # one launch a call: two calls, the second profiled
                        "calls": WARMUP_LAUNCHES + 1,
                    }
                )
                ranges.append((case, reply))
        except _ChildGone as g:
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
        for case, reply in ranges:
            out.events.append(self._event(cid, case, reply, launches, report, artifacts, out))
        return out

    def _event(
        self,
        cid: str,
        case: CaseSpec,
        reply: dict[str, Any],
        launches: Any,
        report: ncu.NcuReport,
        artifacts: list[str],
        out: NcuResult,
    ) -> ProfileCollected:
        head = f"ncu {self.level.value} set: launch {WARMUP_LAUNCHES + 1} of {self.kernel}"
        diagnostics = [head, *out.diagnostics]
        launch = next(launches, None) if reply.get("ok") and reply.get("profiled") else None
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
        return ProfileCollected(
            candidate_id=cid,
            case_id=case.case_id,
            metrics=metrics,
            kernel_names=[launch.kernel if launch is not None else self.kernel],
            diagnostics="\n".join(diagnostics),
            artifacts=artifacts,
        )


class NcuProfiler:
    """ncu for one run: a prestarted child per candidate, summary or deep set."""

    def __init__(self, evaluator: Evaluator, ncu_command: str = "ncu") -> None:
        self.ev = evaluator
        self.ncu_path = shutil.which(ncu_command)
        self.unsupported: list[str] = []
        self._ready: _Child | None = None

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

    def _child(self, kernel: str, level: Level) -> _Child:
        assert self.ncu_path is not None
        ready, self._ready = self._ready, None
        if ready is not None and (ready.kernel, ready.level) == (kernel, level):
            return ready
        if ready is not None:
            ready.discard()
        return _Child(self.ev, self.ncu_path, kernel, level, self._metrics(level))

    def prestart(self, kernel: str, level: Level = Level.SUMMARY) -> None:
        """Start the child the next candidate will most likely need (no GPU work until asked)."""
        if self.unavailable() is None and self._ready is None:
            self._ready = _Child(
                self.ev, self.ncu_path or "ncu", kernel, level, self._metrics(level)
            )

    def begin(self, source: str) -> None:
        """Hand the next candidate's source to the prestarted child, which builds it at once."""
        ready = self._ready
        if ready is not None:
            try:
                ready.begin(source)
            except _ChildGone:
                self._ready = None
                ready.discard()

    def settle(self, timeout_s: float = SETTLE_TIMEOUT_S) -> None:
        """Wait until the prestarted child has done what it was asked (called before the
        candidate's benchmark, so no profiling work overlaps a benchmark sample)."""
        ready = self._ready
        if ready is None:
            return
        try:
            ready.settle(timeout_s)
        except _ChildGone:
            self._ready = None
            ready.discard()

    def profile(
        self,
        cid: str,
        source: str,
        cases: list[CaseSpec],
        kernel: str,
        level: Level,
        timeout_s: float,
        keep_dir: Path | None = None,
    ) -> NcuResult:
        result = self._child(kernel, level).profile(cid, source, cases, timeout_s, keep_dir)
        if result.missing:
            self.unsupported += [m for m in result.missing if m not in self.unsupported]
            if not any(e.metrics and e.metrics[0].value is not None for e in result.events):
                retry = self._child(kernel, level).profile(cid, source, cases, timeout_s, keep_dir)
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
        self.prestart(kernel)
        return result

    def close(self) -> None:
        ready, self._ready = self._ready, None
        if ready is not None:
            with contextlib.suppress(Exception):
                ready.discard()
