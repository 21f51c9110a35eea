"""The one interface every provider implements, and the typed data it receives and returns.

A provider gets a ProviderContext (built by the loop from the store's views) and returns one
Proposal, or SearchExhausted when it has nothing promising left. It never writes the store
itself: model exchanges are handed to `record`, which appends them as events.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from optimizer.bundle.spec import CaseSpec, TargetSpec
from optimizer.decision.kernel import KernelEvidence

# rows of the store lookups (queries/models.py), used in the context as they come
from queries.models import Exclusion, MeasuredCandidate, NearestConfig
from tlxstore.errors import TlxdbError
from tlxstore.events import (
    DeviceInfo,
    Event,
    Hypothesis,
    KernelLaunch,
    ProfileMetric,
    ProposalRecord,
    StoppingReason,
)


class ProviderError(TlxdbError):
    """The provider could not propose a candidate (recorded as a retryable failure)."""


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True)


class CaseResult(_Model):
    """Measured numbers of one candidate on one case."""

    case_id: str
    median_us: float
    p95_us: float
    cv: float
    bytes_moved: int | None = None
    flops: int | None = None


class ProviderContext(_Model):
    run_id: str
    round: int
    candidate_index: int  # 1-based within the round
    target: TargetSpec
    device: DeviceInfo
    cases: list[CaseSpec]
    parent_id: str
    parent_source: str
    parent_knobs: dict[str, Any] = {}
    original_source: str
    reference_source: str | None = None
    best_per_case: list[CaseResult] = []  # the incumbent's numbers
    baseline_per_case: list[CaseResult] = []
    parent_profile: list[ProfileMetric] = []  # the harness's own profile() of the parent
    parent_kernel: list[KernelEvidence] = []  # tlxdb's attribution, ncu and roofline, per case
    measured: list[MeasuredCandidate] = []  # this run and every prior run with the same identity
    exclusions: list[Exclusion] = []
    prior_best: list[MeasuredCandidate] = []  # best candidates of prior runs, best first
    # configurations other runs promoted for this kernel under another measurement identity (other
    # cases, device of the family, versions, an edited source), nearest first (nearest_history)
    nearest: list[NearestConfig] = []
    history_seeds: int = (
        0  # how many of `nearest` tune re-measures first (thresholds.history_seeds)
    )
    peak_bandwidth_bytes_per_s: float | None = None
    peak_flops_per_s: float | None = None
    # The original kernel's launches observed at run time (the baseline's verification). Rewrites
    # replace launch arguments only, so what the original computed, every descendant computes.
    launches: list[KernelLaunch] = []
    # The launches of the baseline's second verification, the kernels compiled by then: their
    # times (not the first's, which include the JIT compile) say which kernel dominates.
    warm_launches: list[KernelLaunch] = []


class Proposal(ProposalRecord, Hypothesis):
    """One candidate: the complete source, why it should be faster (Hypothesis) and how the
    provider came to it (ProposalRecord); the loop records it as CandidateProposed."""

    source: str
    hypothesis: str = Field(min_length=1)


class SearchExhausted(_Model):
    """The provider has nothing promising left; the run stops early with this reason. When some
    knobs were invisible to it, the stop says so (StoppingReason.KNOBS_UNREADABLE)."""

    reason: str
    stopping_reason: StoppingReason = StoppingReason.SEARCH_EXHAUSTED


Recorder = Callable[[Event], None]


class Provider(Protocol):
    name: str
    model: str | None

    def propose(self, ctx: ProviderContext, record: Recorder) -> Proposal | SearchExhausted:
        """Propose one candidate derived from ctx.parent_source."""
        ...
