"""A run's state is a pure fold over its events; this is the only way tlxdb reads a run.

`fold(envelopes)` and `RunState.apply(envelope)` give the same state as the live run had, so a
run killed at any point resumes from its log, and `tlxdb replay` re-decides from evidence alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from tlxstore.events import (
    BASELINE_ID,
    BenchmarkSampled,
    BuildFinished,
    BundleValidated,
    CandidateProposed,
    CaseVerified,
    CommitAttempted,
    DecisionMade,
    DeviceEvaluated,
    DevicesAssigned,
    DuplicateDetected,
    Envelope,
    ExclusionRecorded,
    FinalistRevalidated,
    InfrastructureFailed,
    IntegrityFlagged,
    LaunchesObserved,
    MachineSampled,
    ModelExchanged,
    Outcome,
    ProfileCollected,
    RooflineAssessed,
    RunEnvironment,
    RunFinished,
    RunStarted,
    SearchEnded,
    SourceStored,
)


@dataclass
class CandidateState:
    proposal: CandidateProposed
    duplicate: DuplicateDetected | None = None
    build: BuildFinished | None = None
    verifications: list[CaseVerified] = field(default_factory=list)
    samples: list[BenchmarkSampled] = field(default_factory=list)
    machine: list[MachineSampled] = field(default_factory=list)  # the GPU during its calls
    profiles: list[ProfileCollected] = field(default_factory=list)
    rooflines: list[RooflineAssessed] = field(default_factory=list)
    launches: list[LaunchesObserved] = field(default_factory=list)
    flags: list[IntegrityFlagged] = field(default_factory=list)
    failures: list[InfrastructureFailed] = field(default_factory=list)
    decision: DecisionMade | None = None
    exclusion: ExclusionRecorded | None = None
    evaluations: list[DeviceEvaluated] = field(default_factory=list)  # parallel runs only
    sample_devices: list[str | None] = field(default_factory=list)  # the device of each of samples
    # no retryable failure of it came before its decision: "measured" of a decision recorded
    # before DecisionMade v2, which records none (the store's rule for those: project.sql)
    unfailed_when_decided: bool = False

    @property
    def candidate_id(self) -> str:
        return self.proposal.candidate_id

    @property
    def device(self) -> str | None:
        """The device of its last evaluation in a parallel run (None: not measured in one)."""
        return self.evaluations[-1].device if self.evaluations else None

    def samples_on(self, device: str | None) -> list[BenchmarkSampled]:
        """Its samples measured on `device` (in a run without --devices every device is None)."""
        return [s for s, d in zip(self.samples, self.sample_devices, strict=True) if d == device]

    @property
    def decided(self) -> bool:
        return self.decision is not None

    @property
    def measured(self) -> bool:
        """Whether its source counts as measured under the run's measurement key: the baseline
        once validation benchmarked it (it needs no decision), any candidate whose decision
        measured it (decision_measured). The store's seen_sources view answers the same."""
        benchmarked = self.candidate_id == BASELINE_ID and any(s.samples_us for s in self.samples)
        return benchmarked or self.decision_measured

    @property
    def decision_measured(self) -> bool:
        """Whether its decision rests on a full measurement of its source: as the decision
        records it (DecisionMade.measured), or, for a decision recorded before that field, when
        no retryable failure of it came before the decision (as v1 stores had it). The store's
        decisions view copies the same (project.sql); tests/queries/test_verdicts.py holds the
        fold and the views equal."""
        d = self.decision
        if d is None:
            return False
        return d.measured if d.measured is not None else self.unfailed_when_decided

    def window_samples(self, window_id: str, phase: str) -> list[BenchmarkSampled]:
        """Its samples of one phase measured in one window (its own, or another candidate's
        that it was a reference in)."""
        return [s for s in self.samples if s.window_id == window_id and s.phase == phase]

    def samples_by_case(self, phase: str | None = None) -> dict[str, list[float]]:
        """All raw samples (us) per case, optionally of one phase, in recorded order."""
        out: dict[str, list[float]] = {}
        for s in self.samples:
            if phase is None or s.phase == phase:
                out.setdefault(s.case_id, []).extend(s.samples_us)
        return out


def full_measurement(c: CandidateState) -> bool:
    """The rule of "measured", in one place: the candidate is no duplicate and no infrastructure
    failure (retryable: a timeout, a crash, a stop of tlxdb) cut its evaluation short. The loop
    records it on every decision (DecisionMade.measured); the store copies what is recorded."""
    return c.duplicate is None and not any(f.retryable for f in c.failures)


@dataclass
class RunState:
    run_id: str | None = None
    started: RunStarted | None = None
    validation: BundleValidated | None = None
    sources: dict[str, SourceStored] = field(default_factory=dict)  # by source_hash
    candidates: dict[str, CandidateState] = field(default_factory=dict)  # in proposal order
    exchanges: dict[str, ModelExchanged] = field(default_factory=dict)
    run_failures: list[InfrastructureFailed] = field(
        default_factory=list
    )  # not tied to a candidate
    revalidations: list[FinalistRevalidated] = field(default_factory=list)
    commits: list[CommitAttempted] = field(default_factory=list)
    search_ended: SearchEnded | None = None
    finished: RunFinished | None = None
    devices: DevicesAssigned | None = None  # a parallel run's devices
    environments: list[RunEnvironment] = field(default_factory=list)  # at start, each resume
    last_seq: int = -1
    # the device of the evaluation whose evidence is being applied, and how many events it has left
    _evaluation: tuple[str, int] | None = field(default=None, repr=False)

    @property
    def primary_device(self) -> str | None:
        """Where evidence outside a DeviceEvaluated append was measured: the run's own device."""
        return self.devices.devices[0] if self.devices else None

    # ---- derived ------------------------------------------------------------------------
    @property
    def incumbent_id(self) -> str | None:
        """The current best: the last promoted candidate, else the baseline if it exists."""
        best = None
        for c in self.candidates.values():
            if c.decision is not None and c.decision.outcome == Outcome.PROMOTED:
                best = c.candidate_id
        if best is None and BASELINE_ID in self.candidates:
            best = BASELINE_ID
        return best

    @property
    def rounds_started(self) -> int:
        return max((c.proposal.round for c in self.candidates.values()), default=0)

    def undecided(self) -> list[CandidateState]:
        return [c for c in self.candidates.values() if not c.decided]

    # ---- the fold -----------------------------------------------------------------------
    def apply(self, env: Envelope) -> RunState:
        """Apply one event in sequence order (mutates and returns self)."""
        if env.seq != self.last_seq + 1:
            raise ValueError(f"run {env.run_id}: expected seq {self.last_seq + 1}, got {env.seq}")
        self.last_seq = env.seq
        self.run_id = env.run_id
        e = env.event
        device = self.primary_device
        if self._evaluation is not None:
            device, left = self._evaluation
            self._evaluation = (device, left - 1) if left > 1 else None
        match e:
            case RunStarted():
                self.started = e
            case BundleValidated():
                self.validation = e
            case SourceStored():
                self.sources[e.source_hash] = e
            case CandidateProposed():
                self.candidates[e.candidate_id] = CandidateState(proposal=e)
            case ModelExchanged():
                self.exchanges[e.exchange_id] = e
            case DuplicateDetected():
                self.candidates[e.candidate_id].duplicate = e
            case BuildFinished():
                self.candidates[e.candidate_id].build = e
            case CaseVerified():
                self.candidates[e.candidate_id].verifications.append(e)
            case BenchmarkSampled():
                self.candidates[e.candidate_id].samples.append(e)
                self.candidates[e.candidate_id].sample_devices.append(device)
            case MachineSampled():
                self.candidates[e.candidate_id].machine.append(e)
            case RunEnvironment():
                self.environments.append(e)
            case ProfileCollected():
                self.candidates[e.candidate_id].profiles.append(e)
            case RooflineAssessed():
                self.candidates[e.candidate_id].rooflines.append(e)
            case LaunchesObserved():
                self.candidates[e.candidate_id].launches.append(e)
            case IntegrityFlagged():
                self.candidates[e.candidate_id].flags.append(e)
            case InfrastructureFailed():
                if e.candidate_id is not None and e.candidate_id in self.candidates:
                    self.candidates[e.candidate_id].failures.append(e)
                else:
                    self.run_failures.append(e)
            case DecisionMade():
                decided = self.candidates[e.candidate_id]
                decided.decision = e
                decided.unfailed_when_decided = not any(f.retryable for f in decided.failures)
            case ExclusionRecorded():
                self.candidates[e.candidate_id].exclusion = e
            case FinalistRevalidated():
                self.revalidations.append(e)
            case CommitAttempted():
                self.commits.append(e)
            case SearchEnded():
                self.search_ended = e
            case RunFinished():
                self.finished = e
            case DevicesAssigned():
                self.devices = e
            case DeviceEvaluated():
                self.candidates[e.candidate_id].evaluations.append(e)
                self._evaluation = (e.device, e.events) if e.events else None
        return self


def fold(envelopes: Iterable[Envelope]) -> RunState:
    """The state of one run from its events, in sequence order."""
    state = RunState()
    for env in envelopes:
        state.apply(env)
    return state
