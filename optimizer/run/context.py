"""The provider's view of the world: a ProviderContext built from the store's views and the run.

What it holds: the parent (the current best) and its numbers and profile, the baseline's
numbers, every candidate measured under this run's measurement identity in any run, every
exclusion for this bundle and device kind (all of them, grouped), the best candidates of prior
runs, the evidence of runs named with --prior-run even when they measured elsewhere, and the
nearest history of the kernel (configurations other runs promoted under other identities).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from optimizer.bundle.loading import Bundle
from optimizer.decision import kernel, stats
from optimizer.providers.base import CaseResult, Exclusion, MeasuredCandidate, ProviderContext
from queries import lookups
from queries.models import Figure, NearestConfig
from tlxstore.events import BASELINE_ID, DeviceInfo, Outcome, Phase
from tlxstore.fold import CandidateState, RunState
from tlxstore.store import Store


def case_results(c: CandidateState, phase: Phase | None = None) -> list[CaseResult]:
    """Median, p95 and CV of one candidate's samples per case."""
    declared = {s.case_id: s for s in c.samples}
    return [
        CaseResult(
            case_id=case_id,
            median_us=n.median_us,
            p95_us=n.p95_us,
            cv=n.cv,
            bytes_moved=declared[case_id].bytes_moved,
            flops=declared[case_id].flops,
        )
        for case_id, n in stats.per_case(c.samples_by_case(phase)).items()
    ]


def measured_in(state: RunState, *, pending: bool = False) -> list[MeasuredCandidate]:
    """Every decided candidate of one run, as the context lists them; with `pending`, the
    undecided ones too (outcome None): in the run being filled a parallel run proposes a whole
    round before measuring it, and a provider must not propose one of them again."""
    assert state.run_id is not None
    out = []
    for c in state.candidates.values():
        d = c.decision
        if c.candidate_id == BASELINE_ID or (d is None and not pending):
            continue
        out.append(
            MeasuredCandidate(
                run_id=state.run_id,
                candidate_id=c.candidate_id,
                source_hash=c.proposal.source_hash,
                knobs=c.proposal.knobs,
                outcome=d.outcome.value if d else None,
                speedup=d.speedup if d else None,
                ci_low=d.ci_low if d else None,
                ci_high=d.ci_high if d else None,
                reason=d.reason if d else "proposed in this round, not measured yet",
                hypothesis=c.proposal.hypothesis,
            )
        )
    return out


def exclusions_in(state: RunState) -> list[Exclusion]:
    return [
        Exclusion(
            signature=e.signature, outcome=e.outcome.value, reason=e.reason, hypothesis=e.hypothesis
        )
        for c in state.candidates.values()
        if (e := c.exclusion) is not None
    ]


def _merge_exclusions(groups: Sequence[Exclusion], extra: Sequence[Exclusion]) -> list[Exclusion]:
    by_sig = {(e.signature, e.outcome): e for e in groups}
    for e in extra:
        key = (e.signature, e.outcome)
        if key not in by_sig:
            by_sig[key] = e
    return list(by_sig.values())


def _merge_measured(*lists: Sequence[MeasuredCandidate]) -> list[MeasuredCandidate]:
    seen: dict[tuple[str, str], MeasuredCandidate] = {}
    for lst in lists:
        for m in lst:
            seen.setdefault((m.run_id, m.candidate_id), m)
    return list(seen.values())


def _best_first(measured: Sequence[MeasuredCandidate]) -> list[MeasuredCandidate]:
    good = [m for m in measured if m.outcome == Outcome.PROMOTED.value and m.speedup is not None]
    return sorted(good, key=lambda m: -(m.speedup or 0.0))


@dataclass(frozen=True)
class SharedEvidence:
    """The store's part of a context: what every run under this identity has learned."""

    measured: list[MeasuredCandidate]
    exclusions: list[Exclusion]
    prior_best: list[MeasuredCandidate]
    nearest: list[NearestConfig] | None  # None: the store does not hold the run yet
    # the final revalidations of the runs before this one, by (run, candidate): read once a run
    revalidations: dict[tuple[str, str], list[Figure]] = field(default_factory=dict)


def fetch_shared(
    store: Store,
    measurement_key: str,
    bundle_digest: str,
    device_kind: str,
    run_id: str,
    nearest: list[NearestConfig] | None = None,
    revalidations: dict[tuple[str, str], list[Figure]] | None = None,
) -> SharedEvidence:
    """The three context lookups at one generation of the store (lookups.prompt_context:
    milliseconds on a large store); run off the loop's critical path. `nearest` and
    `revalidations`: as read before (each is read once a run: lookups.nearest_configs,
    lookups.revalidations), or None to read them. Each measured candidate carries its
    revalidations, so a provider pools what the views pool (source_estimates)."""
    measured, exclusions, prior_best = lookups.prompt_context(
        store, measurement_key, bundle_digest, device_kind, run_id
    )
    if nearest is None:
        nearest = lookups.nearest_configs(store, run_id)
    if revalidations is None:
        revalidations = lookups.revalidations(store, measurement_key)
    return SharedEvidence(
        measured=with_revalidations(measured, revalidations),
        exclusions=exclusions,
        prior_best=with_revalidations(prior_best, revalidations),
        nearest=nearest,
        revalidations=revalidations,
    )


def with_revalidations(
    measured: Sequence[MeasuredCandidate], revalidations: dict[tuple[str, str], list[Figure]]
) -> list[MeasuredCandidate]:
    """`measured`, each entry with the final revalidations of its candidate."""
    return [
        m.model_copy(update={"revalidations": found})
        if (found := revalidations.get((m.run_id, m.candidate_id)))
        else m
        for m in measured
    ]


def build_context(
    *,
    shared: SharedEvidence,
    state: RunState,
    bundle: Bundle,
    device: DeviceInfo,
    round: int,
    candidate_index: int,
    prior_runs: Sequence[RunState] = (),
    peak_bandwidth_bytes_per_s: float | None = None,
    peak_flops_per_s: float | None = None,
) -> ProviderContext:
    assert state.started is not None and state.run_id is not None
    parent_id = state.incumbent_id or BASELINE_ID
    parent = state.candidates[parent_id]
    baseline = state.candidates[BASELINE_ID]
    phase = Phase.VALIDATION if parent_id == BASELINE_ID else Phase.ROUND
    prior_measured = [m for p in prior_runs for m in measured_in(p)]
    prior_exclusions = [e for p in prior_runs for e in exclusions_in(p)]
    measured = _merge_measured(
        measured_in(state, pending=True),
        shared.measured,
        prior_measured,
    )
    return ProviderContext(
        run_id=state.run_id,
        round=round,
        candidate_index=candidate_index,
        target=bundle.target_spec,
        device=device,
        cases=bundle.cases,
        parent_id=parent_id,
        parent_source=state.sources[parent.proposal.source_hash].text,
        parent_knobs=parent.proposal.knobs,
        original_source=state.sources[baseline.proposal.source_hash].text,
        reference_source=bundle.reference_source,
        best_per_case=case_results(parent, phase),
        baseline_per_case=case_results(baseline, Phase.VALIDATION),
        parent_profile=[
            m for p in parent.profiles if not kernel.is_own_profile(p) for m in p.metrics
        ],
        parent_kernel=kernel.evidence(state, parent_id),
        measured=measured,
        exclusions=_merge_exclusions(
            shared.exclusions,
            [*exclusions_in(state), *prior_exclusions],
        ),
        prior_best=_merge_measured(
            shared.prior_best,
            _best_first(prior_measured),
        ),
        nearest=shared.nearest or [],
        history_seeds=state.started.thresholds.history_seeds,
        peak_bandwidth_bytes_per_s=peak_bandwidth_bytes_per_s,
        peak_flops_per_s=peak_flops_per_s,
        launches=[
            launch
            for observed in baseline.launches
            if observed.attempt == 1
            for launch in observed.launches
        ],
        warm_launches=[
            launch
            for observed in baseline.launches
            if observed.attempt == 2
            for launch in observed.launches
        ],
    )
