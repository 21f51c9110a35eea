"""The run loop: project the state from events, plan the next step, act, append events.

Invariants:
- The loop keeps no state the events do not hold: `plan()` is a pure function of the folded run
  (plus the elapsed time and what the provider said last), so a run killed anywhere resumes from
  its log with `resume()`. A candidate whose evaluation was cut off is recorded as an interrupted
  infrastructure failure and evaluated again once, in the same slot; nothing decided is redone.
- Every event is appended to the run log as it happens (durable on return) and ingested into the
  store after every candidate and at the end.
- A candidate's parent is the current best. Before evaluating, its source is looked up (raw and
  normalized hash) among everything measured under this run's measurement key, in this run and in
  the store; a duplicate is recorded with what it duplicates and that result is reused.
  Infrastructure failures do not count as measured.
- Every rejected or failed candidate gets an exclusion with a signature (its knobs, else its change).
- A candidate is measured in a window with its references (the baseline, and the incumbent
  when that is another candidate), alternated in one child (optimizer.evaluation.window); its
  decision compares samples of that window only.
- The winner is revalidated against a fresh baseline before it is reported or committed, in
  independent replicates (a fresh child each) that must agree; a prior run's winner is never
  adopted. When the finalist does not survive, the next promoted candidate
  (the winner chain, at most MAX_FINALISTS) is revalidated; the first that survives wins.
- A provider that proposes only sources measured before is stopped after
  MAX_DUPLICATES_IN_A_ROW duplicates in a row (provider_repeating).
"""

from __future__ import annotations

import contextlib
import copy
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed, wait
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from typing import Literal

from optimizer.bundle.loading import BundleChangedError, FrozenBundle
from optimizer.decision import kernel, policy, stats
from optimizer.decision.identity import source_hashes
from optimizer.evaluation import ncu_child, window
from optimizer.evaluation.evaluator import Evaluator
from optimizer.evaluation.guards import files as file_guard
from optimizer.evaluation.ncu_child import NcuProfiler
from optimizer.evaluation.requests import EvalRequest, Reference
from optimizer.providers.base import Proposal, Provider, ProviderError, SearchExhausted
from optimizer.reporting.from_views import write_run_report
from optimizer.reporting.result import (
    RunResult,
    kept_not_committed,
    live_changes,
    result_from_state,
    winner,
)
from optimizer.run.context import SharedEvidence, build_context, fetch_shared
from optimizer.run.devices import DevicePool
from optimizer.run.folder import OutputFolder
from optimizer.run.storelink import StoreLink
from queries import lookups
from queries.models import Figure, MeasuredMatch, NearestConfig
from tlxstore.disk import disk_full
from tlxstore.errors import DiskFullError, RunInterruptedError
from tlxstore.events import (
    BASELINE_ID,
    CandidateProposed,
    CommitAttempted,
    DecisionMade,
    DeviceEvaluated,
    DeviceInfo,
    DuplicateDetected,
    Envelope,
    Event,
    ExclusionRecorded,
    FailureKind,
    InfrastructureFailed,
    IntegrityFlagged,
    Outcome,
    Phase,
    ProfilingFinished,
    RunFinished,
    SearchEnded,
    SourceStored,
    StoppingReason,
    Thresholds,
    new_event_id,
    replicate_window,
)
from tlxstore.fold import CandidateState, RunState, fold
from tlxstore.runlog import RunLog
from tlxstore.store import Store

INTERRUPTED_STAGE = "interrupted"
REVALIDATION_ALTERNATIONS = 3
MAX_PROVIDER_FAILURES = 3  # consecutive failures to propose before the run stops
MAX_DUPLICATES_IN_A_ROW = 4  # consecutive proposals of measured sources before the run stops
MAX_FINALISTS = 3  # promoted candidates the winner chain revalidates at most
REVALIDATION_REPLICATES = 3  # on a GPU, unless --replicates says otherwise (docs/GUARDS.md)

Observer = Callable[[Envelope, RunState], None]


# ---- planning (pure) ------------------------------------------------------------------------


class Step(Enum):
    PROPOSE = "propose"
    EVALUATE = "evaluate"
    MEASURE_BASELINES = "measure_baselines"  # parallel: the baseline on every other device
    EVALUATE_ROUND = "evaluate_round"  # parallel: the round's candidates, one child per device
    DECIDE = "decide"  # parallel: the next candidate in proposal order whose evidence is in
    RETRY = "retry"  # an evaluation cut off by a crash of tlxdb: record it, evaluate again
    END_SEARCH = "end_search"  # record why no more candidates are proposed
    REVALIDATE = "revalidate"
    COMMIT = "commit"
    FINISH = "finish"
    DONE = "done"


@dataclass(frozen=True)
class Next:
    step: Step
    candidate_id: str | None = None
    round: int = 0
    index: int = 0
    reason: StoppingReason | None = None


@dataclass(frozen=True)
class Budget:
    """What bounds the search besides the events: time spent and what the provider said."""

    elapsed_s: float = 0.0
    exhausted: str | None = None
    exhausted_as: StoppingReason = StoppingReason.SEARCH_EXHAUSTED
    provider_failures: int = 0
    commit: bool = False


def interrupted(c: CandidateState) -> bool:
    return any(f.stage == INTERRUPTED_STAGE for f in c.failures)


def infrastructure_failed(c: CandidateState) -> bool:
    return any(f.retryable for f in c.failures)


def next_slot(state: RunState, per_round: int) -> tuple[int, int]:
    """(round, 1-based index) of the next candidate; interrupted evaluations do not use a slot."""
    used = Counter(
        c.proposal.round
        for c in state.candidates.values()
        if c.candidate_id != BASELINE_ID and not interrupted(c)
    )
    r = max(used, default=1)
    return (r + 1, 1) if used[r] >= per_round else (r, used[r] + 1)


def duplicates_in_a_row(state: RunState) -> int:
    """How many of the last proposals were answered as duplicates, back to the last that was not."""
    n = 0
    for c in reversed(state.candidates.values()):
        if c.candidate_id == BASELINE_ID or c.decision is None:
            continue
        if c.decision.outcome != Outcome.DUPLICATE:
            break
        n += 1
    return n


def finalists(state: RunState) -> list[str]:
    """The order the winner chain revalidates in: the incumbent (it beat every candidate promoted
    before it, each in its own window), then the other promoted candidates, best decided
    speedup first (the later on a tie); at most MAX_FINALISTS."""
    incumbent = state.incumbent_id
    promoted = [
        (c.decision.speedup or 0.0, i, c.candidate_id)
        for i, c in enumerate(state.candidates.values())
        if c.candidate_id not in (BASELINE_ID, incumbent)
        and c.decision is not None
        and c.decision.outcome == Outcome.PROMOTED
    ]
    ranked = [cid for _, _, cid in sorted(promoted, key=lambda x: (-x[0], -x[1]))]
    first = [] if incumbent in (None, BASELINE_ID) else [incumbent]
    return (first + ranked)[:MAX_FINALISTS]


def next_finalist(state: RunState) -> str | None:
    """The next candidate the winner chain revalidates; None once one survived or none is left."""
    if any(r.survived for r in state.revalidations):
        return None
    tried = {r.candidate_id for r in state.revalidations}
    return next((f for f in finalists(state) if f not in tried), None)


def stop_reason(state: RunState, t: Thresholds, budget: Budget) -> StoppingReason | None:
    if state.search_ended is not None:
        return state.search_ended.reason
    if budget.exhausted is not None:
        return budget.exhausted_as
    if budget.provider_failures >= MAX_PROVIDER_FAILURES:
        return StoppingReason.PROVIDER_FAILED
    if duplicates_in_a_row(state) >= MAX_DUPLICATES_IN_A_ROW:
        return StoppingReason.PROVIDER_REPEATING
    if next_slot(state, t.candidates_per_round)[0] > t.max_rounds:
        return StoppingReason.MAX_ROUNDS
    if budget.elapsed_s >= t.max_total_seconds:
        return StoppingReason.MAX_TOTAL_SECONDS
    return None


def devices_without_baseline(state: RunState) -> list[str]:
    """The devices of a parallel run, besides its own, whose baseline was not measured yet."""
    assert state.devices is not None
    done = {e.device for e in state.candidates[BASELINE_ID].evaluations}
    return [d for d in state.devices.devices[1:] if d not in done]


def usable_devices(state: RunState) -> list[str]:
    """The run's own device and every other whose baseline has samples of each case the run's
    baseline has (a device whose baseline failed is not used: nothing to compare with there)."""
    assert state.devices is not None
    base = state.candidates[BASELINE_ID]
    own = state.devices.devices[0]
    needed = {s.case_id for s in base.samples_on(own)}
    return [own] + [
        d for d in state.devices.devices[1:] if needed <= {s.case_id for s in base.samples_on(d)}
    ]


def _plan_round(state: RunState, t: Thresholds, budget: Budget) -> Next | None:
    """A parallel run's search: fill the round with proposals, evaluate them all at once, decide
    them in proposal order. None once the search is over."""
    undecided = [c for c in state.undecided() if c.candidate_id != BASELINE_ID]
    if undecided and undecided[0].evaluations:
        return Next(Step.DECIDE, undecided[0].candidate_id)
    waiting = [c for c in undecided if not c.evaluations]
    reason = stop_reason(state, t, budget)
    if reason is None and devices_without_baseline(state):
        return Next(Step.MEASURE_BASELINES)
    if reason is None:
        r, i = next_slot(state, t.candidates_per_round)
        if not waiting or r == waiting[0].proposal.round:
            return Next(Step.PROPOSE, round=r, index=i)
    if waiting:
        return Next(Step.EVALUATE_ROUND, round=waiting[0].proposal.round)
    return None


def plan(state: RunState, t: Thresholds, budget: Budget) -> Next:
    """The next step of a run, from its events alone (plus the budget)."""
    if state.finished is not None and state.finished.stopping_reason != StoppingReason.INTERRUPTED:
        return Next(Step.DONE)
    if state.devices is not None:
        searching = _plan_round(state, t, budget)
        if searching is not None:
            return searching
    for c in state.undecided():
        if c.candidate_id == BASELINE_ID:
            continue
        started = c.build or c.verifications or c.samples or c.failures or c.profiles or c.flags
        return Next(Step.RETRY if started else Step.EVALUATE, c.candidate_id)
    reason = stop_reason(state, t, budget)
    if reason is None:
        r, i = next_slot(state, t.candidates_per_round)
        return Next(Step.PROPOSE, round=r, index=i)
    if state.search_ended is None:
        return Next(Step.END_SEARCH, reason=reason)
    finalist = next_finalist(state)
    if finalist is not None:
        return Next(Step.REVALIDATE, finalist, reason=reason)
    if budget.commit and winner(state) is not None and not state.commits:
        return Next(Step.COMMIT, winner(state), reason=reason)
    return Next(Step.FINISH, reason=reason)


def provider_failures_in_a_row(envelopes: list[Envelope]) -> int:
    n = 0
    for env in reversed(envelopes):
        e = env.event
        if isinstance(e, CandidateProposed):
            break
        if isinstance(e, InfrastructureFailed) and e.kind == FailureKind.PROVIDER:
            n += 1
    return n


def signature(p: CandidateProposed) -> str:
    """What a hypothesis changed, canonical: its knobs, else its change text, else its hypothesis."""
    if p.knobs:
        return ",".join(f"{k}={p.knobs[k]}" for k in sorted(p.knobs))
    return " ".join((p.change or p.hypothesis).split())


# ---- acting ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Measured:
    """One evaluation of a parallel run, as a worker thread hands it back."""

    candidate_id: str
    device: str
    started_at: datetime
    finished_at: datetime
    events: list[Event]


@dataclass(frozen=True)
class Ceilings:
    """Device ceilings; None where unknown (a CPU has none)."""

    bandwidth_bytes_per_s: float | None
    flops_per_s: float | None


@dataclass
class Setup:
    """Everything a run needs besides its events (made by optimizer.run.lifecycle)."""

    store: Store
    frozen: FrozenBundle
    evaluator: Evaluator
    ceilings: Ceilings  # what a kernel can reach on this device, for the providers
    provider: Provider
    output: OutputFolder
    thresholds: Thresholds
    prior_runs: list[RunState]
    commit: Callable[[RunState, str], CommitAttempted] | None = None
    observer: Observer | None = None
    ncu: NcuProfiler | None = None  # kernel-level profiles on CUDA targets
    devices: DevicePool | None = None  # a parallel run's evaluators, one per device


class RunLoop:
    def __init__(
        self, setup: Setup, log: RunLog, envelopes: list[Envelope], elapsed_before_s: float = 0.0
    ) -> None:
        self.s = setup
        self.log = log
        self.envelopes = list(envelopes)
        self.state = RunState()
        for env in self.envelopes:
            self.state.apply(env)
        self._state_lock = threading.Lock()  # a parallel run's workers copy the state under it
        self._uningested: list[Envelope] = []
        self._t0 = time.monotonic() - elapsed_before_s
        self._exhausted: str | None = None
        self._exhausted_as = StoppingReason.SEARCH_EXHAUSTED
        self._link: StoreLink[SharedEvidence] | None = None
        self._nearest: list[NearestConfig] | None = None  # read with the first shared evidence
        self._revalidations: dict[tuple[str, str], list[Figure]] | None = None  # likewise

    @property
    def link(self) -> StoreLink[SharedEvidence]:
        """The background link to the store, started on first use (after validation)."""
        if self._link is None:
            self._link = StoreLink(self.s.store, self._fetch_shared)
        return self._link

    def _fetch_shared(self, store: Store) -> SharedEvidence:
        started, run_id = self.state.started, self.state.run_id  # set once, by the first event
        assert started is not None and run_id is not None
        shared = fetch_shared(
            store,
            started.measurement_key,
            started.bundle_digest,
            started.device.kind,
            run_id,
            self._nearest,
            self._revalidations,
        )
        self._nearest = shared.nearest  # the nearest history is read once a run
        self._revalidations = shared.revalidations  # as are the runs' revalidations before it
        return shared

    # -- events --
    def append(self, *events: Event) -> None:
        envs = self.log.append(events)
        for env in envs:
            with self._state_lock:
                self.state.apply(env)
            self.envelopes.append(env)
            if self.s.observer is not None:
                self.s.observer(env, self.state)
        self._uningested.extend(envs)

    def ingest(self) -> None:
        """Hand the events appended since the last call to the store (ingested in the background)."""
        if self._uningested:
            self.link.ingest(self._uningested)
            self._uningested = []

    # -- the loop --
    def budget(self) -> Budget:
        return Budget(
            elapsed_s=time.monotonic() - self._t0,
            exhausted=self._exhausted,
            exhausted_as=self._exhausted_as,
            provider_failures=provider_failures_in_a_row(self.envelopes),
            commit=self.s.commit is not None,
        )

    def run(self) -> RunResult:
        actions = {
            Step.PROPOSE: self._propose,
            Step.EVALUATE: self._evaluate,
            Step.MEASURE_BASELINES: self._measure_baselines,
            Step.EVALUATE_ROUND: self._evaluate_round,
            Step.DECIDE: self._decide,
            Step.RETRY: self._retry,
            Step.END_SEARCH: self._end_search,
            Step.REVALIDATE: self._revalidate,
            Step.COMMIT: self._commit,
            Step.FINISH: self._finish,
        }
        self.s.evaluator.keep_ready = True  # each candidate's child loads during the last one's end
        try:
            base = self.state.candidates.get(BASELINE_ID)
            if base is not None and base.samples and kernel.needs_profiling(base):
                self._profile_kernels(BASELINE_ID)  # measured during validation
            while (nxt := plan(self.state, self.s.thresholds, self.budget())).step is not Step.DONE:
                actions[nxt.step](nxt)
        except KeyboardInterrupt:
            self._resync()
            self.append(
                RunFinished(
                    stopping_reason=StoppingReason.INTERRUPTED,
                    success=False,
                    detail="interrupted; continue with --resume",
                )
            )
            self._write_final()
        except Exception as e:  # a changed bundle, or a bug: record why the run ended
            if (full := disk_full(e)) is not None:  # not the run's end: it stops, resumable
                raise self._stopped_by_full_disk(full) from None
            reason = (
                StoppingReason.BUNDLE_CHANGED
                if isinstance(e, BundleChangedError)
                else StoppingReason.ERROR
            )
            self.append(
                RunFinished(
                    stopping_reason=reason,
                    success=False,
                    detail=str(e).splitlines()[0] if str(e) else type(e).__name__,
                )
            )
            self._write_final()
            if reason is StoppingReason.ERROR:
                raise
        finally:
            self.s.evaluator.close()
            if self.s.ncu is not None:
                self.s.ncu.close()
            self.ingest()
            self.link.close()  # every event of the run is in the store now
            if self.state.finished is not None:
                assert self.state.run_id is not None
                write_run_report(self.link.store, self.state.run_id, self.s.output.root)
        return self.result()

    def _stopped_by_full_disk(self, full: DiskFullError) -> RunInterruptedError:
        """The run stops as interrupted, so --resume continues it once there is room: its
        RunFinished(interrupted) is recorded if the log still takes it, nothing else is written."""
        with contextlib.suppress(DiskFullError, OSError):
            self._resync()
            self.append(
                RunFinished(
                    stopping_reason=StoppingReason.INTERRUPTED,
                    success=False,
                    detail=f"{full.message}; continue with --resume",
                )
            )
        return RunInterruptedError(
            f"{full.message}: run {self.state.run_id} stopped as interrupted; free space and "
            f"continue it with `tlxdb optimize --resume {self.s.output.root}`"
        )

    def _resync(self) -> None:
        """Re-read the log: an interrupt may have landed between a durable append and its fold."""
        self.envelopes = self.log.envelopes()
        self.state = fold(self.envelopes)
        self._uningested = list(self.envelopes)  # ingest is idempotent

    def result(self) -> RunResult:
        return result_from_state(self.state, self.s.output.root, self.s.store.location)

    # -- steps --
    def _source(self, candidate_id: str) -> str:
        return self.state.sources[self.state.candidates[candidate_id].proposal.source_hash].text

    def _weights(self) -> tuple[dict[str, float], set[str]]:
        cases = self.s.frozen.bundle.cases
        return {c.case_id: c.weight for c in cases}, {c.case_id for c in cases if c.protected}

    def _next_id(self) -> str:
        return f"c{sum(1 for c in self.state.candidates if c != BASELINE_ID) + 1:03d}"

    def _propose(self, nxt: Next) -> None:
        self._check_files(f"before {self._next_id()} was proposed")
        before = file_guard.hash_paths(self.s.frozen.watched)
        ctx = build_context(
            shared=self.link.shared(),
            state=self.state,
            bundle=self.s.frozen.bundle,
            device=self._device(),
            round=nxt.round,
            candidate_index=nxt.index,
            prior_runs=self.s.prior_runs,
            peak_bandwidth_bytes_per_s=self.s.ceilings.bandwidth_bytes_per_s,
            peak_flops_per_s=self.s.ceilings.flops_per_s,
        )
        try:
            out = self.s.provider.propose(ctx, lambda ev: self.append(ev))
        except ProviderError as e:
            self.append(
                InfrastructureFailed(
                    candidate_id=None,
                    stage="propose",
                    kind=FailureKind.PROVIDER,
                    retryable=True,
                    diagnostics=e.message,
                )
            )
            self._refuse_changed_files(before, None)
            return
        if isinstance(out, SearchExhausted):
            self._refuse_changed_files(before, None)
            self._exhausted = out.reason
            self._exhausted_as = out.stopping_reason
            return
        self._refuse_changed_files(before, self._record_proposal(out, ctx.parent_id, nxt.round))

    def _refuse_changed_files(self, before: dict[str, str], cid: str | None) -> None:
        """After a proposal. The user's kernel or a bundle original that changed while the
        provider was proposing (the user kept working, or an agent with the user's rights wrote
        outside its workspace) is recorded and the run goes on (_record_live_changes). A file of
        the private copy that changed (it is read-only: a process with more rights wrote it)
        flags the proposed candidate (blocking `files:changed`, so the policy rejects it
        unmeasured) and stops the run (BundleChangedError: bundle_changed, no winner). tlxdb
        restores nothing: it never writes the user's files."""
        while_ = f"while {cid} was being proposed" if cid else "while the provider was proposing"
        self._record_live_changes(while_)
        watched = self.s.frozen.watched
        changed = file_guard.changed_paths(before, file_guard.hash_paths(watched))
        names = {str(path): label for path, label in watched.items()}
        if not changed:
            return
        if cid is not None:
            flags = [
                IntegrityFlagged(
                    candidate_id=cid,
                    guard="files:changed",
                    detail=f"protected file {path} changed {while_}",
                    blocking=True,
                )
                for path in changed
            ]
            # one batch with its decision (the policy's for a blocking flag): a kill cannot
            # leave a flagged candidate undecided, which a resume would evaluate again
            decided = self.state.candidates[cid].decision is not None  # a duplicate
            refusal = DecisionMade(
                candidate_id=cid,
                outcome=Outcome.REJECTED,
                reason=f"integrity guard {flags[0].guard}: {flags[0].detail}",
            )
            self.append(*flags, *([] if decided else self._decision_events(cid, refusal)))
            self.ingest()
        first = changed[0]
        raise BundleChangedError(f"{names[first]} changed {while_} ({first}); the run stops")

    def _check_files(self, when: str) -> None:
        """Before each step: the private copy must be as frozen (else BundleChangedError stops
        the run); a user's file that changed is recorded (_record_live_changes)."""
        self.s.frozen.check()
        self._record_live_changes(when)

    def _record_live_changes(self, when: str) -> None:
        """Each of the user's files (the kernel, a bundle original) seen changed for the first
        time gets a non-blocking `files:live-changed` flag naming it and when it was seen, on the
        baseline (whose files they are: tlxdb cannot tell who changed them). The run goes on: it
        measures its frozen copy and the baseline it recorded, so the edit reaches no
        measurement; its winner is kept in the output folder, not committed. Once the winner
        is committed (tlxdb wrote the kernel, docs/COMMIT.md) the user's files are theirs again."""
        started = self.state.started
        assert started is not None
        if any(c.success for c in self.state.commits):
            return
        known = [f.detail for f in live_changes(self.state)]
        seen = datetime.now(UTC).strftime("%H:%M:%S")
        flags = [
            IntegrityFlagged(
                candidate_id=BASELINE_ID,
                guard=file_guard.LIVE_CHANGED,
                detail=f"{label} ({path}) changed {when} (seen at {seen} UTC)",
                blocking=False,
            )
            for path, label in self.s.frozen.live_changes(started.kernel_sha256)
            if not any(d.startswith(f"{label} ({path}) changed ") for d in known)
        ]
        if flags:
            self.append(*flags)
            self.ingest()

    def _device(self) -> DeviceInfo:
        assert self.state.started is not None
        return self.state.started.device

    def _record_proposal(self, p: Proposal, parent_id: str, round_: int) -> str:
        """Record a proposal under the next candidate id, and return that id."""
        cid = self._next_id()
        raw, norm = source_hashes(p.source)
        fields = p.model_dump(exclude={"source"})
        proposal = CandidateProposed(
            candidate_id=cid,
            parent_id=parent_id,
            round=round_,
            provider=self.s.provider.name,
            source_hash=raw,
            normalized_hash=norm,
            **fields,
        )
        events: list[Event] = []
        if raw not in self.state.sources:
            events.append(
                SourceStored(
                    source_hash=raw,
                    normalized_hash=norm,
                    text=p.source,
                    size_bytes=len(p.source.encode("utf-8")),
                )
            )
        events.append(proposal)
        events += self._duplicate_events(cid, raw, norm, in_store=p.remeasures is None)
        self.s.output.write_experiment(
            cid, p.source, parent_id, self._source(parent_id), self._source(BASELINE_ID)
        )
        self.append(*events)
        if len(events) > 2 or events[-1] is not proposal:
            self.ingest()
        return cid

    def _duplicate_events(self, cid: str, raw: str, norm: str, in_store: bool) -> list[Event]:
        """A proposal that re-measures a recorded one measures history on purpose: it is deduplicated only in this run."""
        m = self._find_in_run(raw, norm) or (self._find_in_store(raw, norm) if in_store else None)
        if m is None:
            return []
        shown = f", speedup {m.speedup:.3f}" if m.speedup else ""
        already = "proposed earlier in this round" if m.pending else m.outcome or "measured"
        return [
            DuplicateDetected(
                candidate_id=cid,
                match=m.match,
                duplicate_of_run=m.run_id,
                duplicate_of_candidate=m.candidate_id,
            ),
            DecisionMade(
                candidate_id=cid,
                outcome=Outcome.DUPLICATE,
                reason=f"same source ({m.match} hash) as {m.run_id}/{m.candidate_id}, "
                f"already {already}{shown}; not measured again",
                speedup=m.speedup,
                ci_low=m.ci_low,
                ci_high=m.ci_high,
                compared_to=f"{m.run_id}/{m.candidate_id}",
                measured=False,
            ),
        ]

    def _find_in_run(self, raw: str, norm: str) -> MeasuredMatch | None:
        """A measured candidate of this run (the baseline included) with this source, or one
        proposed earlier in the round a parallel run is filling."""
        assert self.state.run_id is not None
        for c in self.state.candidates.values():
            p, d = c.proposal, c.decision
            pending = c.candidate_id != BASELINE_ID and d is None  # in a parallel round
            if not (pending or c.measured) or (pending and (c.failures or c.duplicate)):
                continue
            kind: Literal["raw", "normalized"] | None = None
            if p.source_hash == raw:
                kind = "raw"
            elif p.normalized_hash == norm:
                kind = "normalized"
            if kind is not None:
                return MeasuredMatch(
                    run_id=self.state.run_id,
                    candidate_id=c.candidate_id,
                    source_hash=p.source_hash,
                    match=kind,
                    outcome=d.outcome.value if d else None,
                    speedup=d.speedup if d else None,
                    ci_low=d.ci_low if d else None,
                    ci_high=d.ci_high if d else None,
                    reason=d.reason if d else "",
                    pending=pending,
                )
        return None

    def _find_in_store(self, raw: str, norm: str) -> MeasuredMatch | None:
        """A candidate measured under this measurement key in any run of the store (as its
        decision recorded it: DecisionMade.measured, projected as proj_decisions.measured)."""
        assert self.state.started is not None
        return lookups.find_measured(self.s.store, self.state.started.measurement_key, raw, norm)

    def _request(self, cid: str) -> EvalRequest:
        """The evaluation of `cid` in its window, beside the baseline and the incumbent."""
        c = self.state.candidates[cid]
        parent = self.state.candidates[c.proposal.parent_id or BASELINE_ID]
        parent_medians = {k: stats.median(v) for k, v in parent.samples_by_case().items() if v}
        t = self.s.thresholds
        references = [] if cid == BASELINE_ID else [BASELINE_ID]
        if self.state.incumbent_id not in (None, BASELINE_ID, cid):
            references.append(self.state.incumbent_id)
        return EvalRequest(
            candidate_id=cid,
            source=self._source(cid),
            phase=Phase.ROUND,
            repetitions=t.benchmark_repetitions,
            references=[Reference(candidate_id=r, source=self._source(r)) for r in references],
            max_cv=t.max_cv,
            max_extra_blocks=t.max_extra_blocks,
            timeout_s=t.max_candidate_seconds,
            parent_medians_us=parent_medians,
            artifacts_dir=self.s.output.artifacts_dir(cid),
        )

    def _evaluate(self, nxt: Next) -> None:
        cid = nxt.candidate_id
        assert cid is not None
        self._check_files(f"before {cid} was evaluated")
        ncu = self.s.ncu
        if ncu is not None:
            ncu.begin(self._source(cid))  # the prestarted ncu child builds it meanwhile
        self.s.evaluator.evaluate(
            self._request(cid),
            lambda ev: self.append(ev),
            before_benchmark=None if ncu is None else ncu.settle,
            after_benchmark=None if ncu is None else ncu.prestart,
            second_window=lambda: policy.owes_second_window(
                self.state, cid, self.s.thresholds, *self._weights()
            ),
        )
        self._decide(nxt)

    def _decide(self, nxt: Next) -> None:
        cid = nxt.candidate_id
        assert cid is not None
        self._profile_kernels(cid)  # ncu and the roofline, before the decision
        decision = policy.decide(self.state, cid, self.s.thresholds, *self._weights())
        self.append(*self._decision_events(cid, decision))
        self.ingest()

    def _decision_events(self, cid: str, decision: DecisionMade) -> list[Event]:
        """The decision, and the exclusion a rejected or failed candidate gets (unless it failed
        for the infrastructure's sake)."""
        c = self.state.candidates[cid]
        events: list[Event] = [decision]
        if decision.outcome in (Outcome.REJECTED, Outcome.FAILED) and not infrastructure_failed(c):
            events.append(
                ExclusionRecorded(
                    candidate_id=cid,
                    signature=signature(c.proposal),
                    outcome=decision.outcome,
                    reason=decision.reason,
                    hypothesis=c.proposal.hypothesis,
                )
            )
        return events

    def _profile_kernels(self, cid: str, finalist: bool = False) -> None:
        """ncu (the set optimizer.decision.kernel.profiling_level names) and the roofline of an
        evaluated candidate: their own phase, after its benchmark, before its decision."""
        weights, protected = self._weights()
        level = kernel.profiling_level(
            self.state, cid, self.s.thresholds, weights, protected, finalist
        )
        c = self.state.candidates[cid]
        main, ncu = kernel.main_kernel(c), self.s.ncu
        if ncu is None or level is None or main is None or ncu.unavailable() is not None:
            if ncu is not None:
                ncu.skip()  # the next candidate's ncu child may use the GPU
            if level is None:
                return
        else:
            measured = c.samples_by_case()
            cases = [case for case in self.s.evaluator.bundle.cases if measured.get(case.case_id)]
            base = self.state.candidates.get(BASELINE_ID)
            if ncu.reference is None and base is not None and (ref := kernel.main_kernel(base)):
                # a resumed run: the baseline was profiled before it
                ncu.reference = ncu_child.BaselineKernel(self._source(BASELINE_ID), ref)
            result = ncu.profile(
                cid,
                self._source(cid),
                cases,
                main,
                level,
                timeout_s=self.s.thresholds.max_candidate_seconds,
                keep_dir=self.s.output.artifacts_dir(cid),
                baseline=cid == BASELINE_ID,
            )
            self.append(
                *result.events,
                ProfilingFinished(
                    candidate_id=cid,
                    tool=ncu_child.SOURCE,
                    level=level.value,
                    cases=len(cases),
                    wall_ms=result.wall_ms,
                    waited_ms=result.settle_ms + result.wall_ms,
                ),
            )
        started = self.state.started
        assert started is not None
        self.append(*kernel.assess(self.state, cid, started.device.kind))

    # -- parallel runs: one harness child per device, one writer (this thread) --
    def _measure_baselines(self, nxt: Next) -> None:
        """The baseline on every other device, before that device measures a candidate."""
        self._check_files("before the other devices' baselines were measured")
        request = self._request(BASELINE_ID).model_copy(update={"profile": False})
        devices = devices_without_baseline(self.state)
        self._in_parallel([(request, d) for d in devices], devices)

    def _evaluate_round(self, nxt: Next) -> None:
        """Every proposed candidate of the round not yet evaluated, each on the next free device
        (a round larger than the device count queues); decisions follow in proposal order."""
        self._check_files(f"before round {nxt.round} was evaluated")
        waiting = [
            c.candidate_id
            for c in self.state.undecided()
            if c.candidate_id != BASELINE_ID and not c.evaluations
        ]
        jobs: list[tuple[EvalRequest, str | None]] = [(self._request(c), None) for c in waiting]
        self._in_parallel(jobs, usable_devices(self.state))

    def _in_parallel(self, jobs: list[tuple[EvalRequest, str | None]], devices: list[str]) -> None:
        """Run the jobs (a request, and the device it must run on or None for any free one) on
        `devices` at once. Each evaluation's evidence is appended, here, as one batch opened by
        DeviceEvaluated when it ends; the decisions follow when all have ended."""
        assert self.s.devices is not None
        free: queue.SimpleQueue[str] = queue.SimpleQueue()
        for d in devices:
            free.put(d)
        stopping = threading.Event()
        with ThreadPoolExecutor(len(devices), thread_name_prefix="tlxdb-device") as pool:
            futures = [pool.submit(self._measure, req, dev, free, stopping) for req, dev in jobs]
            try:
                for done in as_completed(futures):
                    m = done.result()
                    self.append(self._device_evaluated(m), *m.events)
                    self.ingest()
            except BaseException:
                stopping.set()
                for f in futures:
                    f.cancel()
                while not all(f.done() for f in futures):  # kill children as they start
                    self.s.evaluator.stop()
                    wait(futures, timeout=0.1)
                raise
        # Decided once every device is idle: a decision may profile its candidate (ncu, on the
        # run's own device), which must not overlap another candidate's benchmark there.
        while (nxt := plan(self.state, self.s.thresholds, self.budget())).step is Step.DECIDE:
            self._decide(nxt)

    def _device_evaluated(self, m: _Measured) -> DeviceEvaluated:
        """The event that opens an evaluation's batch of events: the device it ran on, when."""
        assert self.s.devices is not None
        return DeviceEvaluated(
            candidate_id=m.candidate_id,
            device=m.device,
            simulated=self.s.devices.assigned.simulated,
            pinned=self.s.devices.evaluator(m.device).pin,
            started_at=m.started_at,
            finished_at=m.finished_at,
            events=len(m.events),
        )

    def _measure(
        self,
        req: EvalRequest,
        device: str | None,
        free: queue.SimpleQueue[str],
        stopping: threading.Event,
    ) -> _Measured:
        """One evaluation in a worker thread: its evidence is collected, never appended here."""
        assert self.s.devices is not None
        dev = device if device is not None else free.get()
        try:
            events: list[Event] = []
            started = datetime.now(UTC)
            if not stopping.is_set():
                cid = req.candidate_id
                self.s.devices.evaluator(dev).evaluate(
                    req,
                    events.append,
                    second_window=None
                    if cid == BASELINE_ID
                    else lambda: self._owes_second_window(cid, dev, events),
                )
            return _Measured(req.candidate_id, dev, started, datetime.now(UTC), events)
        finally:
            if device is None:
                free.put(dev)

    def _owes_second_window(self, cid: str, device: str, first_window: list[Event]) -> bool:
        """policy.owes_second_window for a candidate a worker thread measured on `device`: asked
        of a copy of the run's state with the first window's events (collected there, appended
        only when the evaluation ends) applied as the loop will append them, after their
        DeviceEvaluated. The copy is the state of the moment: the decisions of this round come
        after every evaluation of it, so the incumbent is the one the candidate was measured
        beside."""
        with self._state_lock:
            state = copy.deepcopy(self.state)
        run_id, now = state.run_id, datetime.now(UTC)
        assert run_id is not None
        opened = self._device_evaluated(_Measured(cid, device, now, now, first_window))
        for event in [opened, *first_window]:
            state.apply(
                Envelope(
                    event_id=new_event_id(),
                    run_id=run_id,
                    seq=state.last_seq + 1,
                    recorded_at=now,
                    event=event,  # type: ignore[arg-type]  # any event; the union is the same set
                )
            )
        return policy.owes_second_window(state, cid, self.s.thresholds, *self._weights())

    def _retry(self, nxt: Next) -> None:
        cid = nxt.candidate_id
        assert cid is not None
        old = self.state.candidates[cid].proposal
        new_id = self._next_id()
        self.append(
            InfrastructureFailed(
                candidate_id=cid,
                stage=INTERRUPTED_STAGE,
                kind=FailureKind.CRASH,
                retryable=True,
                diagnostics=f"tlxdb stopped during this evaluation; evaluated again as {new_id}",
            ),
            DecisionMade(
                candidate_id=cid,
                outcome=Outcome.FAILED,
                reason=f"evaluation interrupted by a stop of tlxdb; evaluated again as {new_id}",
                measured=False,
            ),
            old.model_copy(update={"candidate_id": new_id}),
        )
        self.s.output.write_experiment(
            new_id,
            self._source(new_id),
            old.parent_id,
            self._source(old.parent_id or BASELINE_ID),
            self._source(BASELINE_ID),
        )

    def _replicates(self) -> int:
        """The final revalidation's replicates: --replicates, else REVALIDATION_REPLICATES on a
        GPU and 1 on the CPU, whose interpreter's timings differ between processes by more than
        any bound a winner could be held to (docs/MEASUREMENTS.md)."""
        if self.s.thresholds.replicates is not None:
            return self.s.thresholds.replicates
        return 1 if self._device().backend == "cpu" else REVALIDATION_REPLICATES

    def _revalidate(self, nxt: Next) -> None:
        fid = nxt.candidate_id
        assert fid is not None
        self._check_files(f"before {fid}'s final revalidation")
        t = self.s.thresholds
        replicates = self._replicates()
        fin = self.state.candidates[fid]
        done = {s.window_id for s in fin.samples if s.phase == Phase.REVALIDATION}
        for k in range(replicates):  # each in a fresh child; those measured before a resume kept
            if replicate_window(fid, k) in done:
                continue
            self.s.evaluator.revalidate(
                fid,
                self._source(fid),
                BASELINE_ID,
                self._source(BASELINE_ID),
                alternations=REVALIDATION_ALTERNATIONS,
                repetitions=window.replicate_repetitions(t.benchmark_repetitions, replicates),
                timeout_s=t.max_candidate_seconds * (2 * REVALIDATION_ALTERNATIONS + 2),
                emit=lambda ev: self.append(ev),
                max_cv=t.max_cv,
                max_extra_blocks=t.max_extra_blocks,
                window_id=replicate_window(fid, k),
            )
        self.append(policy.decide_revalidation(self.state, fid, BASELINE_ID, t, *self._weights()))
        if not kernel.has_deep_profile(self.state.candidates[fid]):
            self._profile_kernels(fid, finalist=True)
        self.ingest()

    def _commit(self, nxt: Next) -> None:
        assert self.s.commit is not None and nxt.candidate_id is not None
        self._check_files(f"before {nxt.candidate_id} was committed")
        self.append(self.s.commit(self.state, nxt.candidate_id))

    def _end_search(self, nxt: Next) -> None:
        assert nxt.reason is not None
        self.append(SearchEnded(reason=nxt.reason, detail=self._exhausted or ""))

    def _finish(self, nxt: Next) -> None:
        self._check_files("by the end of the run")
        win = winner(self.state)
        rev = next((r for r in self.state.revalidations if r.candidate_id == win), None)
        last_rev = self.state.revalidations[-1] if self.state.revalidations else None
        ended = self.state.search_ended.detail if self.state.search_ended else ""
        detail = ended or (last_rev.reason if last_rev and not last_rev.survived else "")
        fell = [r.candidate_id for r in self.state.revalidations if not r.survived]
        if win is not None and fell:
            detail += f"{'; ' if detail else ''}final revalidation: {', '.join(fell)} did not "
            detail += f"survive, {win} did"
        if win is None and not self.state.revalidations:
            detail = detail or "no candidate beat the baseline"
        if win is not None:
            detail = kept_not_committed(self.state, win) or detail
        assert nxt.reason is not None
        self.append(
            RunFinished(
                stopping_reason=nxt.reason,
                success=win is not None,
                winner_id=win,
                speedup=rev.speedup if rev else None,
                detail=detail,
            )
        )
        self._write_final()

    def _write_final(self) -> None:
        win = winner(self.state)
        best = self._source(win or BASELINE_ID)
        result = self.result()
        self.s.output.write_tlx(self.state, win, self._source(BASELINE_ID))
        self.s.output.write_final(result, best)
