"""The evidence: every fact tlxdb knows is one of these events.

Invariants:
- Events are immutable past-tense facts (frozen pydantic models). An event type's fields may
  only change with a new SCHEMA_VERSION and an upcaster from the previous version (upcasting.py).
- An event is validated before it enters a log; a record read back is upcast to the current
  version and validated again.
- Measured quantities carry their unit in the field name (_us, _ms, _bytes, _usd).
- Unknown is None, never 0 (profile metrics, tokens, cost).
- Hashes are tagged strings ("sha256:<hex>") from tlxstore.hashing.

The envelope (Envelope) adds what the run log assigns: event_id, run_id, dense per-run seq
(starting at 0), and recorded_at.
"""

from __future__ import annotations

import os
import time
import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

# --------------------------------------------------------------------------------------------
# Shared value types


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Outcome(StrEnum):
    """What was decided about a candidate."""

    PROMOTED = "promoted"
    REJECTED = "rejected"  # measured and correct, but not good enough (or a guard refused it)
    FAILED = "failed"  # did not build, did not verify, or the harness failed on it
    DUPLICATE = "duplicate"  # already measured under the same identity; earlier results reused


class FailureKind(StrEnum):
    """Why an evaluation could not finish. Infrastructure kinds are retryable and never burn a
    source hash."""

    TIMEOUT = "timeout"
    CRASH = "crash"  # the child process died (signal, segfault, OOM)
    DEVICE_FAULT = "device_fault"
    PROVIDER = "provider"  # the provider could not propose (model error, agent crash)
    HARNESS_ERROR = "harness_error"  # the harness raised on the candidate (not retryable)


class StoppingReason(StrEnum):
    MAX_ROUNDS = "max_rounds"
    MAX_TOTAL_SECONDS = "max_total_seconds"
    SEARCH_EXHAUSTED = "search_exhausted"  # the provider has nothing promising left
    KNOBS_UNREADABLE = "knobs_unreadable"  # nothing left to try that the provider can see, and
    # some knobs it could not read (KnobsUnreadable says which): not a finished search
    PROVIDER_FAILED = "provider_failed"
    PROVIDER_REPEATING = "provider_repeating"  # the provider proposed only sources measured
    # before, MAX_DUPLICATES_IN_A_ROW times in a row (optimizer/run/loop.py)
    BUNDLE_CHANGED = "bundle_changed"
    VALIDATION_FAILED = "validation_failed"
    INTERRUPTED = "interrupted"
    ERROR = "error"


class HypothesisKind(StrEnum):
    """What kind of change a hypothesis makes: the one vocabulary of CandidateProposed's
    hypothesis_kind, shared by every provider (the tune provider's knob kinds, a model's reply,
    an agent's candidate_metadata.json), so reports and exclusions group by it across runs.
    Events recorded before it may hold other strings; they are read as they are."""

    UNSPECIFIED = "unspecified"  # the provider said nothing (the baseline, older events)
    LAUNCH_CONFIG = "launch_config"  # several launch knobs at once, autotune configs
    BLOCK_SIZE = "block_size"  # BLOCK sizes only
    NUM_WARPS = "num_warps"  # num_warps only
    NUM_STAGES = "num_stages"  # num_stages only
    AUTOTUNE_PIN = "autotune_pin"  # one config of an @triton.autotune list pinned
    TILING = "tiling"  # tile shapes, split-K, program-to-data mapping
    MEMORY_ACCESS = "memory_access"  # coalescing, vectorization, cache/eviction hints
    LAYOUT = "layout"  # avoiding layout conversions, reduction axes, epilogue layouts
    PIPELINING = "pipelining"  # software pipelining, async copies, multi-buffering
    TMA = "tma"  # tensor descriptors, TMA loads and stores
    WARP_SPECIALIZATION = "warp_specialization"  # producer/consumer tasks, register reallocation
    SYNCHRONIZATION = "synchronization"  # barriers, fences, phases
    SCHEDULING = "scheduling"  # persistent kernels, tile order, L2 swizzle, CLC
    FUSION = "fusion"  # fusing passes or kernels, removing round trips to memory
    ALGORITHM = "algorithm"  # a different algorithm or reformulation
    OTHER = "other"


BASELINE_ID = "baseline"  # the candidate id of the untouched kernel in every run


class Phase(StrEnum):
    """When a measurement was taken."""

    VALIDATION = "validation"  # the baseline, before round 1
    ROUND = "round"  # a candidate in a round
    REVALIDATION = "revalidation"  # finalist vs fresh baseline, interleaved A B A B


class ToolVersions(Frozen):
    tlxdb: str
    python: str
    triton: str | None = None
    torch: str | None = None
    cuda: str | None = None
    duckdb: str | None = None


class DeviceInfo(Frozen):
    """The hardware a run measured on. `kind` is what identifies comparable measurements
    (e.g. "NVIDIA H200", or "cpu-interpreter")."""

    kind: str
    backend: Literal["cuda", "hip", "cpu"]
    architecture: str | None = None
    num_sms: int | None = None
    l2_bytes: int | None = None


class Thresholds(Frozen):
    """The budget and decision thresholds a run used (after flags and budget.json)."""

    max_rounds: int = Field(gt=0)
    candidates_per_round: int = Field(gt=0)
    max_candidate_seconds: float = Field(gt=0)
    max_total_seconds: float = Field(gt=0)
    min_speedup: float = Field(ge=1.0)
    max_cv: float = Field(ge=0)  # 0, as the TLX agent allows: only constant samples (CV 0) pass
    benchmark_repetitions: int = Field(gt=0)
    # alternation blocks a candidate may get beyond its first ones, while a case's samples in
    # its window stay noisier than max_cv (docs/GUARDS.md, "Noisy cases")
    max_extra_blocks: int = Field(default=6, ge=0)
    # the TLX agent's rule: a case noisier than max_cv blocks promotion whatever the interval
    strict_noise: bool = False
    # the final revalidation's independent replicates (fresh children; None: 3 on a GPU, 1 on
    # the CPU interpreter) and how far their speedups may spread (max / min - 1) for the
    # finalist to be kept (docs/GUARDS.md, "Replicates")
    replicates: int | None = Field(default=None, ge=1)
    replicate_tolerance: float = Field(default=0.02, ge=0)
    # how many configurations of the kernel's nearest history (other cases, versions, devices of
    # the family, an edited source: the view nearest_history) tune re-measures first (docs/TUNE.md)
    history_seeds: int = Field(default=2, ge=0)


TLX_DEFAULT_THRESHOLDS = Thresholds(
    max_rounds=5,
    candidates_per_round=2,
    max_candidate_seconds=600,
    max_total_seconds=3600,
    min_speedup=1.01,
    max_cv=0.10,
    benchmark_repetitions=10,
    max_extra_blocks=0,
    strict_noise=True,
    history_seeds=0,
)
"""The TLX agent's OptimizationBudget defaults and its rule (a case noisier than max_cv blocks
promotion; no extra measurement): what an imported TLX agent folder (which does not record its
values) is taken to have run with."""

DEFAULT_THRESHOLDS = TLX_DEFAULT_THRESHOLDS.model_copy(
    update={"max_extra_blocks": 6, "strict_noise": False, "history_seeds": 2}
)
"""tlxdb's flag defaults: the TLX agent's budget, with up to 6 extra alternation blocks for a noisy
case and promotion on the interval where a case stays noisy (docs/GUARDS.md, "Noisy cases")."""


class CheckOutcome(StrEnum):
    """A validation check passes, warns (it could not prove the bundle safe, nor harmful) or fails
    (it proved the bundle cannot protect an optimization)."""

    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"


class ValidationCheck(Frozen):
    """One check of the bundle. `passed` False blocks the run; `warning` marks a check that could
    not prove its point (a passed check that warns, or under --strict-validation a failed one)."""

    name: str
    passed: bool
    detail: str = ""
    warning: bool = False

    @property
    def outcome(self) -> CheckOutcome:
        if not self.passed:
            return CheckOutcome.FAIL
        return CheckOutcome.WARN if self.warning else CheckOutcome.PASS


class ProfileMetric(Frozen):
    """One normalized profile metric. value None means the tool could not read it."""

    name: str
    value: float | None
    unit: str
    source: str  # "proton", "ncu", "harness"


class CaseSpeedup(Frozen):
    case_id: str
    weight: float
    baseline_median_us: float
    candidate_median_us: float
    speedup: float
    candidate_cv: float
    baseline_p95_us: float | None = None
    candidate_p95_us: float | None = None
    baseline_cv: float | None = None
    baseline_samples: int | None = None  # how many samples each median is of
    candidate_samples: int | None = None


# --------------------------------------------------------------------------------------------
# Events


class Event(Frozen):
    """Base of every event. Subclasses set `type` (a Literal of their own name) and SCHEMA_VERSION."""

    SCHEMA_VERSION: ClassVar[int] = 1
    type: str


class RunStarted(Event):
    # v2: thresholds.max_extra_blocks and strict_noise; v3: case_parameters, thresholds.history_seeds
    SCHEMA_VERSION: ClassVar[int] = 3
    type: Literal["RunStarted"] = "RunStarted"
    argv: list[str]
    host: str
    device: DeviceInfo
    tool_versions: ToolVersions
    thresholds: Thresholds
    provider: str
    model: str | None = None
    kernel_path: str
    kernel_sha256: str
    bundle_files: dict[str, str]  # file name -> tagged sha256
    bundle_digest: str  # digest of bundle_files, the bundle's identity
    measurement_key: str  # digest of (device.kind, triton, torch, bundle_digest): see identity.py
    output_dir: str
    prior_runs: list[str] = []
    resumed_from: str | None = None
    label: str | None = None
    # cases.json weights and protected cases, so a run can be re-decided from its events alone;
    # protected_cases None: unknown (every weighted case counts as protected)
    case_weights: dict[str, float] = {}
    protected_cases: list[str] | None = None
    # each case's parameters as cases.json gives them (case id -> name -> value), so the shapes of
    # two bundles can be compared (nearest_history); {}: not recorded (a v1/v2 run)
    case_parameters: dict[str, dict[str, Any]] = {}


class BundleValidated(Event):
    """The bundle's checks before round 1. `strict`: warnings were made failures
    (--strict-validation)."""

    type: Literal["BundleValidated"] = "BundleValidated"
    passed: bool
    checks: list[ValidationCheck]
    strict: bool = False

    @property
    def warnings(self) -> list[ValidationCheck]:
        return [c for c in self.checks if c.warning]


class SourceStored(Event):
    """A source text, content-addressed by its raw hash."""

    type: Literal["SourceStored"] = "SourceStored"
    source_hash: str
    normalized_hash: str
    text: str
    size_bytes: int


class Hypothesis(Frozen):
    """Why a candidate should be faster, in its provider's words. A provider's Proposal and the
    CandidateProposed event recording it share these fields."""

    hypothesis: str
    evidence: str = ""
    change: str = ""
    expected_effect: str = ""
    risk: str = ""
    hypothesis_kind: str = HypothesisKind.UNSPECIFIED.value  # a HypothesisKind value
    commit_title: str | None = None
    commit_summary: str | None = None


class ProposalRecord(Frozen):
    """How a provider came to a candidate: its configuration, the prompt and model exchange, what
    they cost, the recorded candidate it re-proposes. Shared by Proposal and CandidateProposed."""

    knobs: dict[str, Any] = {}  # the configuration signature (knob -> value), when known
    prompt_hash: str | None = None
    exchange_id: str | None = None  # the ModelExchanged event that produced it
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None
    # "run_id/candidate_id" this candidate re-proposes, to be measured again here (v1: `replays`)
    remeasures: str | None = None


class CandidateProposed(ProposalRecord, Hypothesis, Event):
    """A candidate and why: its place in the run, the provider's Hypothesis and ProposalRecord
    fields, and its source hashes (the text is a SourceStored event)."""

    SCHEMA_VERSION: ClassVar[int] = 2  # v2: `replays` renamed `remeasures`
    type: Literal["CandidateProposed"] = "CandidateProposed"
    candidate_id: str  # unique within the run: "baseline", "c001", ...
    parent_id: str | None
    round: int  # 0 for the baseline
    provider: str
    source_hash: str
    normalized_hash: str


class ModelExchanged(Event):
    """One request to a model or agent and its reply. API keys never appear here."""

    type: Literal["ModelExchanged"] = "ModelExchanged"
    exchange_id: str
    provider: str
    model: str | None
    prompt: str
    reply: str | None
    error: str | None = None
    attempt: int = 1
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None
    latency_ms: float


class DuplicateDetected(Event):
    type: Literal["DuplicateDetected"] = "DuplicateDetected"
    candidate_id: str
    match: Literal["raw", "normalized"]
    duplicate_of_run: str
    duplicate_of_candidate: str


class BuildFinished(Event):
    type: Literal["BuildFinished"] = "BuildFinished"
    candidate_id: str
    success: bool
    duration_ms: float
    diagnostics: str = ""


class CaseVerified(Event):
    type: Literal["CaseVerified"] = "CaseVerified"
    candidate_id: str
    case_id: str
    passed: bool
    phase: Phase = Phase.ROUND
    attempt: int = 1  # verifications of one case are numbered; the last is after the benchmark
    seed: int | None = None
    diagnostics: str = ""
    metrics: dict[str, float | None] = {}


class BenchmarkSampled(Event):
    """Raw samples of one case, from one harness call. Every sample becomes its own row in the
    samples view.

    `window_id` names the measurement window the call belongs to: the evaluation of one
    candidate, in which it and its references (the baseline, the incumbent) were benchmarked
    alternately in one harness child, `block` by `block`, so that every comparison is made
    between samples of the same stretch of time. A reference's samples carry the window of the
    candidate they were measured beside. None: measured before windows existed (version 1), the
    candidate alone, compared with the baseline's validation samples.

    `instance`: which build of the candidate's source in the window's harness child the call
    measured: 1 the first, 2, 3 ... the builds of it again that a second window measures beside
    the first (remeasure_window: several instances of each source in one window, whose gaps are
    the instances', not the sources': optimizer.decision.stats.instance_variance). Version 2 and
    before measured one instance of each member in a window (1)."""

    SCHEMA_VERSION: ClassVar[int] = 3
    type: Literal["BenchmarkSampled"] = "BenchmarkSampled"
    candidate_id: str
    case_id: str
    phase: Phase = Phase.ROUND
    block: int = 0  # the alternation block within its window
    window_id: str | None = None  # the candidate's id, or remeasure_window(it), ...
    instance: int = Field(default=1, ge=1)
    # a block added beyond the first ones: a case of the window was noisier than max_cv, or a
    # call of it ran while the GPU throttled or was shared (MachineSampled), measured again
    extra: bool = False
    samples_us: list[float]
    warmup_count: int | None = None
    cache_policy: str | None = None
    bytes_moved: int | None = None  # declared by the harness/case, for throughput checks
    flops: int | None = None
    # tlxdb's own warm-up calls before this call (benchmark(artifact, case, 1)): before a
    # member's first call on a case in a window (its compile, an autotuner's search), and before
    # the window's very first call for GPU_WARM_UP_S (the GPU idled through build and
    # verification): kept, never in a statistic
    warmup_samples_us: list[float] = []


def remeasure_window(candidate_id: str) -> str:
    """The window of a candidate's second measurement: after a tripwire fired, or before a
    promotion its first window alone would have made (new instances of every member)."""
    return f"{candidate_id}{_REMEASURE}"


_REMEASURE = ".remeasure"


def is_remeasure_window(window_id: str) -> bool:
    """Whether `window_id` is a candidate's second window (remeasure_window)."""
    return window_id.endswith(_REMEASURE)


def replicate_window(finalist_id: str, replicate: int) -> str:
    """The window id of a final revalidation's replicate (0-based): the finalist's own id for
    the first, as before replicates existed, then `<finalist>.replicate2`, ..."""
    return finalist_id if replicate == 0 else f"{finalist_id}.replicate{replicate + 1}"


class Neighbour(Frozen):
    """Another process on the GPU while a benchmark call ran (NVML's process list)."""

    pid: int  # as NVML reports it
    name: str | None = None  # its command name, where this host can read it
    used_memory_bytes: int | None = None  # the most it held on the device; None: not reported
    readings: int  # how many of the call's readings saw it


class MachineSampled(Event):
    """The GPU's state while one harness benchmark() call ran: the call whose BenchmarkSampled
    has the same candidate, case, phase, window and block. Read through NVML in the harness
    child (profilers/nvml.py): once as the call starts, every 50 ms while it runs, once as it
    ends. Clocks in MHz, power in W, temperature in degrees C; None where NVML could not say.
    `reasons`: each clocks event reason NVML set (sw_power_cap, hw_slowdown, ...) with the
    number of readings it was set in. `neighbours`: the other processes on the device. A call
    seen under a degrading reason or beside a neighbour is left out of every decision and
    measured again (optimizer/decision/machine.py); its samples stay in the store. `instance`:
    the BenchmarkSampled's (version 1 measured one instance of each member in a window: 1)."""

    SCHEMA_VERSION: ClassVar[int] = 2
    type: Literal["MachineSampled"] = "MachineSampled"
    candidate_id: str
    case_id: str
    phase: Phase = Phase.ROUND
    window_id: str | None = None
    block: int = 0
    instance: int = Field(default=1, ge=1)
    readings: int = Field(ge=0)
    duration_ms: float
    sm_clock_min_mhz: float | None = None
    sm_clock_median_mhz: float | None = None
    sm_clock_max_mhz: float | None = None
    mem_clock_min_mhz: float | None = None
    mem_clock_median_mhz: float | None = None
    power_median_w: float | None = None
    power_max_w: float | None = None
    temperature_max_c: float | None = None
    reasons: dict[str, int] = {}
    neighbours: list[Neighbour] = []
    source: str = "nvml"  # "recorded": replayed from a trace (TLXDB_NVML_TRACE, for testing)


class RunEnvironment(Event):
    """The machine a run measures on, read once as it starts (and again when it is resumed):
    the GPU's driver, persistence mode, application clocks, power limit and NUMA node, the CPUs
    the harness child may run on and their frequency governor. What could not be read is None;
    `unavailable` says why NVML could not be read at all (the CPU interpreter, no driver), in
    which case no machine state, throttling, neighbour or host cost is recorded in the run.
    `history` and `report` warn where runs compared side by side differ in COMPARED."""

    COMPARED: ClassVar[tuple[str, ...]] = (
        "driver_version",
        "persistence_mode",
        "application_sm_clock_mhz",
        "application_mem_clock_mhz",
        "power_limit_w",
        "gpu_numa_node",
        "cpu_affinity",
        "cpu_governor",
    )
    type: Literal["RunEnvironment"] = "RunEnvironment"
    source: str | None = None  # "nvml", "recorded" (TLXDB_NVML_TRACE), None: not read
    unavailable: str | None = None
    gpu_name: str | None = None
    gpu_uuid: str | None = None
    pci_bus_id: str | None = None
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    persistence_mode: bool | None = None
    application_sm_clock_mhz: int | None = None
    application_mem_clock_mhz: int | None = None
    default_application_sm_clock_mhz: int | None = None
    max_sm_clock_mhz: int | None = None
    power_limit_w: float | None = None
    default_power_limit_w: float | None = None
    gpu_numa_node: int | None = None
    cpu_affinity: list[int] | None = None
    cpu_governor: str | None = None


class ProfileCollected(Event):
    type: Literal["ProfileCollected"] = "ProfileCollected"
    candidate_id: str
    case_id: str
    metrics: list[ProfileMetric]
    kernel_names: list[str] = []
    diagnostics: str = ""
    artifacts: list[str] = []  # absolute paths of raw files


class ProfilingFinished(Event):
    """One candidate's profiling with one tool, a phase of its own: after its last benchmark
    sample, never inside one. `wall_ms` is the tool's own work for this candidate (Proton's
    calls; ncu's ranges and its writing of results); `waited_ms` is the part of the candidate's
    wall time the evaluation spent waiting for it (for ncu also the wait for its child before
    the benchmark). What a prestarted child did beside other work is in neither."""

    type: Literal["ProfilingFinished"] = "ProfilingFinished"
    candidate_id: str
    tool: str  # "proton" or "ncu"
    level: str | None = None  # ncu's metric set: "summary" or "deep"
    cases: int = 0  # cases profiled
    wall_ms: float
    waited_ms: float


class RooflineAssessed(Event):
    """One case of one candidate against the device's ceilings, and whether the three clocks
    (benchmark median, Proton's main kernel per launch, ncu's main-kernel duration) agree."""

    type: Literal["RooflineAssessed"] = "RooflineAssessed"
    candidate_id: str
    case_id: str
    time_us: float  # the main kernel's time the point uses
    time_source: str  # "ncu", "proton" or "benchmark"
    bytes_moved: float | None = None
    bytes_source: str | None = None  # "ncu" (DRAM bytes read + written) or "harness"
    flops: float | None = None
    flops_source: str | None = None  # "harness" or "ncu" (fp32 instructions)
    achieved_bytes_per_s: float | None = None
    achieved_flop_per_s: float | None = None
    bandwidth_ceiling_bytes_per_s: float | None = None
    compute_ceiling_flop_per_s: float | None = None
    bandwidth_fraction: float | None = None
    compute_fraction: float | None = None
    arithmetic_intensity: float | None = None  # flop per byte
    bound: str = "unknown"  # "memory", "compute" or "unknown"
    benchmark_median_us: float | None = None
    proton_main_us: float | None = None
    ncu_main_us: float | None = None
    disagreement: str = ""  # empty when the clocks agree within DISAGREEMENT


class KernelLaunch(Frozen):
    """Launches of one kernel with one set of values and one grid, observed at run time."""

    kernel: str
    constexprs: dict[str, int] = {}
    num_warps: int
    num_stages: int
    grid: list[int] = []
    count: int = 1
    total_us: float = 0.0  # wall time of these launches (the GPU synchronized around each)


class LaunchesObserved(Event):
    """What the kernels of a candidate were launched with, while one case was verified."""

    type: Literal["LaunchesObserved"] = "LaunchesObserved"
    candidate_id: str
    case_id: str
    launches: list[KernelLaunch]
    # The verification it observed: the first (its launch times include the JIT compile and an
    # autotuner's benchmarking) or the second (kernels already compiled: times of the run alone).
    attempt: int = 1


class KnobsUnreadable(Event):
    """Knobs a provider saw but cannot rewrite, each with the reason (one line each)."""

    type: Literal["KnobsUnreadable"] = "KnobsUnreadable"
    candidate_id: str  # the source they were read from
    reasons: list[str]


class IntegrityFlagged(Event):
    """A guard or tripwire fired on a candidate."""

    type: Literal["IntegrityFlagged"] = "IntegrityFlagged"
    candidate_id: str
    guard: str  # e.g. "static:thread", "patched:torch.allclose", "tripwire:speedup>10x"
    detail: str
    blocking: bool  # True: the candidate is refused; False: extra verification was triggered


class InfrastructureFailed(Event):
    type: Literal["InfrastructureFailed"] = "InfrastructureFailed"
    candidate_id: str | None
    stage: str  # "propose", "build", "verify", "benchmark", "profile"
    kind: FailureKind
    retryable: bool
    diagnostics: str = ""


class DecisionMade(Event):
    """What was decided about a candidate, once, by the loop; views copy it and derive nothing.

    `measured`: the decision rests on a full measurement of the candidate's source (not a
    duplicate, no infrastructure failure cut it short), so the source counts as measured under
    the run's measurement key (tlxstore.fold.full_measurement); None in events
    recorded before version 2, where the store derives it as it did then. `notes`: what did not
    block the decision but qualifies it (a case noisier than max_cv, decided on its interval).
    What the interval carried of instances (v3; optimizer.decision.stats.instance_interval):
    `instance_df`, the degrees of freedom of the run's estimate of how far instances of one
    source run apart (0: the run had none), `instance_sigma` that estimate (sigma_I, on the scale
    of a log speedup; None without one), `instance_pairs` the speedup over the baseline of each
    pair of instances a second window measured, the first builds' first; None and [] in events
    recorded before version 3 (their notes say it in words) and in decisions not reached on a
    window's measurement (a failed gate, a duplicate, evidence measured before windows)."""

    SCHEMA_VERSION: ClassVar[int] = 3
    type: Literal["DecisionMade"] = "DecisionMade"
    candidate_id: str
    outcome: Outcome
    reason: str
    speedup: float | None = None  # weighted geometric mean of median ratios vs the baseline
    ci_low: float | None = None
    ci_high: float | None = None
    compared_to: str | None = None  # the incumbent it had to beat
    cases: list[CaseSpeedup] = []
    measured: bool | None = None
    notes: list[str] = []
    instance_df: int | None = None
    instance_sigma: float | None = None
    instance_pairs: list[float] = []


class ExclusionRecorded(Event):
    """A hypothesis that should not be tried again for this kernel, with its signature."""

    type: Literal["ExclusionRecorded"] = "ExclusionRecorded"
    candidate_id: str
    signature: str  # the change it made, canonical (e.g. "BLOCK=16,num_warps=8")
    outcome: Outcome
    reason: str
    hypothesis: str = ""


class FinalistRevalidated(Event):
    """One finalist against a fresh baseline, alternated in one child, in each of its
    independent replicates (a fresh child each; `replicate_speedups`, one per replicate, in
    order; empty before replicates existed, which measured one). When it does not survive, the
    next promoted candidate by decided speedup is revalidated (the winner chain, at most
    MAX_FINALISTS of optimizer/run/loop.py); the first that survives is the winner."""

    SCHEMA_VERSION: ClassVar[int] = 2
    type: Literal["FinalistRevalidated"] = "FinalistRevalidated"
    candidate_id: str
    survived: bool
    reason: str
    speedup: float | None
    ci_low: float | None
    ci_high: float | None
    alternations: int
    cases: list[CaseSpeedup] = []
    notes: list[str] = []
    replicate_speedups: list[float] = []


class CommitAttempted(Event):
    type: Literal["CommitAttempted"] = "CommitAttempted"
    candidate_id: str
    vcs: Literal["git", "hg"] | None
    success: bool
    conflict: bool = False
    rev_before: str | None = None
    rev_after: str | None = None
    subject: str | None = None
    diagnostics: str = ""
    kernel_path: str | None = None
    committed_source_hash: str | None = None  # the file content that landed in the commit
    reverified: bool | None = None  # None: the merged source was the winner itself, no re-verify


class SearchEnded(Event):
    """The run stopped proposing candidates, and why; what follows is revalidation, the commit
    and the finish. Recorded so that a resumed run neither proposes again nor forgets why."""

    type: Literal["SearchEnded"] = "SearchEnded"
    reason: StoppingReason
    detail: str = ""  # e.g. the provider's word that nothing promising is left


class RunFinished(Event):
    type: Literal["RunFinished"] = "RunFinished"
    stopping_reason: StoppingReason
    success: bool
    winner_id: str | None = None
    speedup: float | None = None
    detail: str = ""


class DevicesAssigned(Event):
    """The devices a parallel run (`--devices`) evaluates on, one harness child per device at a
    time. The first is the run's own device: validation, the baseline of the run, and the final
    revalidation are measured there; every other device gets its own baseline measurement before
    its first candidate (a candidate is compared with the baseline of the device it ran on)."""

    type: Literal["DevicesAssigned"] = "DevicesAssigned"
    devices: list[str]  # ids as `--devices` names them ("0", "1", "3"), the first is the run's own
    pin_variable: str | None  # CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES; None: nothing to pin
    simulated: bool = False  # testing only: ids made up on a CPU by TLXDB_SIMULATED_DEVICES


class DeviceEvaluated(Event):
    """One evaluation of a parallel run: the device its harness child was pinned to and when it
    ran. It opens the append that holds the evaluation's evidence: the `events` events after it
    are that evidence, all measured on `device`. An evaluation whose append never reached the
    log left nothing in it and is evaluated again."""

    type: Literal["DeviceEvaluated"] = "DeviceEvaluated"
    candidate_id: str
    device: str  # one id of DevicesAssigned.devices
    simulated: bool = False
    pinned: dict[str, str] = {}  # the variables the harness child got, e.g. CUDA_VISIBLE_DEVICES
    started_at: datetime
    finished_at: datetime
    events: int = Field(ge=0)


AnyEvent = Annotated[
    RunStarted
    | BundleValidated
    | SourceStored
    | CandidateProposed
    | ModelExchanged
    | DuplicateDetected
    | BuildFinished
    | CaseVerified
    | BenchmarkSampled
    | ProfileCollected
    | RooflineAssessed
    | IntegrityFlagged
    | InfrastructureFailed
    | DecisionMade
    | ExclusionRecorded
    | FinalistRevalidated
    | CommitAttempted
    | SearchEnded
    | RunFinished
    | DevicesAssigned
    | DeviceEvaluated
    | LaunchesObserved
    | KnobsUnreadable
    | ProfilingFinished
    | MachineSampled
    | RunEnvironment,
    Field(discriminator="type"),
]

EVENT_TYPES: dict[str, type[Event]] = {
    cls.model_fields["type"].default: cls for cls in get_args(get_args(AnyEvent)[0])
}
"""Every event class by its `type`, in the order of the AnyEvent union."""

EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(AnyEvent)


class Envelope(Frozen):
    """An event as it stands in a log: the event plus what the log assigned."""

    event_id: str
    run_id: str
    seq: int = Field(ge=0)
    recorded_at: datetime
    event: AnyEvent

    @property
    def type(self) -> str:
        return self.event.type

    @property
    def schema_version(self) -> int:
        return type(self.event).SCHEMA_VERSION


def new_event_id() -> str:
    """A UUIDv7 (RFC 9562) as 32 hex digits: 48 bits of Unix time in ms, then random bits. Ids
    made later sort later, so the events a store took in one stretch of time span a narrow range
    of ids, and the store's reused-id check skips every stored block outside a batch's range."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")  # 80 random bits, 74 of them kept
    rand_a, rand_b = rand >> 68 & 0xFFF, rand & (1 << 62) - 1
    return f"{ms & (1 << 48) - 1:012x}7{rand_a:03x}{0x8000000000000000 | rand_b:016x}"


def new_run_id() -> str:
    """Run ids sort by start time: r<UTC yyyymmdd-HHMMSS>-<6 hex>."""
    return f"r{datetime.now(UTC):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"
