"""`tlxdb replay`: rebuild a run from its events and re-decide it, optionally under other thresholds.

Only the decisions are recomputed (policy.decide over the evidence as it stood when each
decision was made); the candidates, their parents and their measurements are the recorded ones.
Under other thresholds a live run might have proposed other candidates: this says what would have
been promoted among those that were measured. Duplicates and interrupted evaluations keep their
recorded decisions.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from optimizer.bundle.loading import check_flags
from optimizer.decision import policy
from optimizer.run.loop import interrupted
from tlxstore.errors import UnknownRunError
from tlxstore.events import BASELINE_ID, DecisionMade, Envelope, Outcome, Phase, Thresholds
from tlxstore.fold import RunState, fold


class Redecision(BaseModel):
    model_config = ConfigDict(frozen=True)

    candidate_id: str
    recorded: Outcome
    replayed: Outcome
    reason: str
    speedup: float | None = None


class ReplayOutcome(BaseModel):
    model_config = ConfigDict(frozen=True)

    run_id: str
    thresholds: Thresholds
    decisions: list[Redecision]
    recorded_best: str | None
    replayed_best: str | None


def _best(state: RunState) -> str | None:
    best = state.incumbent_id
    return None if best == BASELINE_ID else best


def redecide(
    envelopes: list[Envelope], *, min_speedup: float | None = None, max_cv: float | None = None
) -> ReplayOutcome:
    recorded = fold(envelopes)
    if recorded.started is None or recorded.run_id is None:
        raise UnknownRunError("the run has no start record; nothing to replay")
    started = recorded.started
    changes = {k: v for k, v in (("min_speedup", min_speedup), ("max_cv", max_cv)) if v is not None}
    check_flags(changes)  # finite and within the bounds optimize holds them to
    thresholds = Thresholds.model_validate({**started.thresholds.model_dump(), **changes})
    weights = started.case_weights or {
        case: 1.0 for case in recorded.candidates[BASELINE_ID].samples_by_case(Phase.VALIDATION)
    }
    protected = started.protected_cases
    state = RunState()
    out: list[Redecision] = []
    for env in envelopes:
        ev = env.event
        if (
            isinstance(ev, DecisionMade)
            and ev.outcome != Outcome.DUPLICATE
            and not interrupted(state.candidates[ev.candidate_id])
        ):
            d = policy.decide(state, ev.candidate_id, thresholds, weights, protected)
            out.append(
                Redecision(
                    candidate_id=ev.candidate_id,
                    recorded=ev.outcome,
                    replayed=d.outcome,
                    reason=d.reason,
                    speedup=d.speedup,
                )
            )
            env = env.model_copy(update={"event": d})
        state.apply(env)
    return ReplayOutcome(
        run_id=recorded.run_id,
        thresholds=thresholds,
        decisions=out,
        recorded_best=_best(recorded),
        replayed_best=_best(state),
    )
