"""Typed rows of the lookups the loop makes per candidate.

The optimizer's ProviderContext holds these same classes (optimizer/providers/base.py imports
them from here), so a lookup's result goes into a context without conversion.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict


class _Row(BaseModel):
    model_config = ConfigDict(frozen=True)


class Figure(_Row):
    """One more measurement of a candidate's speedup: a final revalidation of it."""

    speedup: float
    ci_low: float | None = None
    ci_high: float | None = None


class MeasuredCandidate(_Row):
    """A candidate measured (or failed) under this run's measurement identity, in any run."""

    run_id: str
    candidate_id: str
    source_hash: str
    knobs: dict[str, Any] = {}
    outcome: str | None  # promoted / rejected / failed / duplicate, None when undecided
    speedup: float | None = None  # vs that run's baseline
    ci_low: float | None = None  # the decision's 99% interval of the speedup
    ci_high: float | None = None
    reason: str = ""
    hypothesis: str = ""
    # its final revalidations (FinalistRevalidated), oldest first: measurements of the same source
    # that the views pool with the decision (source_estimates), and so does a provider
    revalidations: list[Figure] = []


class Exclusion(_Row):
    """A hypothesis that failed or was rejected, grouped across runs."""

    signature: str
    outcome: str
    reason: str
    hypothesis: str = ""
    occurrences: int = 1


class MeasuredMatch(_Row):
    """An earlier measurement of the same source (raw or normalized) under the same identity:
    the one model of "already measured" for the loop's search of its own run and the store's
    (both read the recorded verdict DecisionMade.measured). `pending`: proposed earlier in the
    round a parallel run is filling, not measured yet (no outcome)."""

    run_id: str
    candidate_id: str
    source_hash: str
    match: Literal["raw", "normalized"]
    outcome: str | None
    speedup: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    reason: str = ""
    pending: bool = False


class NearestConfig(_Row):
    """A configuration another run promoted for this kernel, as the view nearest_history ranks
    it for a run (docs/STORE.md): where it was measured, its pooled speedup there (against that
    run's baseline) and what differs from the run asking."""

    rank: int
    from_run_id: str
    from_candidate_id: str
    source_hash: str
    knobs: dict[str, Any] = {}
    speedup: float
    ci_low: float | None = None
    ci_high: float | None = None
    measurements: int = 1
    distance: float
    same_bundle: bool
    same_device: bool
    same_versions: bool
    same_source: bool
    from_prior_run: bool = False
    differs: str = ""
