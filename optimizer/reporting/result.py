"""The result object printed on stdout (docs/CONTRACT.md §2) and the exit codes.

Invariants: `result_from_state` is a pure function of the folded run. A run whose winner could
not be applied to the user's files (a commit that failed, or a user's file that changed during
the run: the winner is kept in the output folder, never committed) exits EXIT_NOT_COMMITTED.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from optimizer.decision import stats
from optimizer.evaluation.guards.files import LIVE_CHANGED
from tlxstore.events import BASELINE_ID, IntegrityFlagged, Outcome, Phase, StoppingReason
from tlxstore.fold import CandidateState, RunState

EXIT_SUCCESS = 0
EXIT_BAD_INPUT = 1
EXIT_NO_WINNER = 2
EXIT_NOT_COMMITTED = 3  # the winner is kept in the output folder: the commit failed, or a user's
# file changed during the run
EXIT_INTERRUPTED = 130


class CaseNumbers(BaseModel):
    model_config = ConfigDict(frozen=True)

    case_id: str
    median_us: float
    p95_us: float
    cv: float
    samples: int


class Experiment(BaseModel):
    model_config = ConfigDict(frozen=True)

    candidate_id: str
    parent_id: str | None
    round: int
    provider: str
    hypothesis: str
    change: str
    knobs: dict
    outcome: Outcome | None
    reason: str
    speedup: float | None
    ci_low: float | None
    ci_high: float | None
    duplicate_of: str | None = None


class CommitResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    vcs: str | None
    success: bool
    conflict: bool
    rev_after: str | None
    subject: str | None
    diagnostics: str


class RunResult(BaseModel):
    """The stdout object (`--result-format full`), also written to result.json."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    output_dir: str
    store: str
    stopping_reason: StoppingReason | None
    success: bool
    detail: str = ""
    baseline: list[CaseNumbers]
    final: list[CaseNumbers]
    speedup: float | None
    ci_low: float | None
    ci_high: float | None
    winner_id: str | None
    commit: CommitResult | None
    experiments: list[Experiment]
    # the user's files (kernel, bundle originals) seen changed during the run, each named with
    # when it was seen; the run measured its frozen copy, and its winner is not committed
    changed_files: list[str] = []

    @property
    def exit_code(self) -> int:
        if self.stopping_reason == StoppingReason.INTERRUPTED:
            return EXIT_INTERRUPTED
        if self.stopping_reason in (StoppingReason.BUNDLE_CHANGED, StoppingReason.ERROR):
            return EXIT_BAD_INPUT
        if self.commit is not None and not self.commit.success:
            return EXIT_NOT_COMMITTED
        if self.success and self.changed_files:
            return EXIT_NOT_COMMITTED
        return EXIT_SUCCESS if self.success else EXIT_NO_WINNER

    def summary(self) -> dict:
        """The short form (`--result-format summary`)."""
        return {
            "run_id": self.run_id,
            "output_dir": self.output_dir,
            "stopping_reason": self.stopping_reason,
            "success": self.success,
            "winner_id": self.winner_id,
            "speedup": self.speedup,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "experiments": len(self.experiments),
            "committed": None if self.commit is None else self.commit.success,
        }


def case_numbers(c: CandidateState, phase: Phase | None) -> list[CaseNumbers]:
    """Median, p95 and CV per case of one candidate's samples (optionally of one phase)."""
    return [
        CaseNumbers(case_id=case_id, **asdict(n))
        for case_id, n in stats.per_case(c.samples_by_case(phase)).items()
    ]


def _experiment(c: CandidateState) -> Experiment:
    p, d = c.proposal, c.decision
    dup = c.duplicate
    return Experiment(
        candidate_id=p.candidate_id,
        parent_id=p.parent_id,
        round=p.round,
        provider=p.provider,
        hypothesis=p.hypothesis,
        change=p.change,
        knobs=p.knobs,
        outcome=d.outcome if d else None,
        reason=d.reason if d else "",
        speedup=d.speedup if d else None,
        ci_low=d.ci_low if d else None,
        ci_high=d.ci_high if d else None,
        duplicate_of=f"{dup.duplicate_of_run}/{dup.duplicate_of_candidate}" if dup else None,
    )


def winner(state: RunState) -> str | None:
    """The candidate that survived final revalidation, if any."""
    survived = [r for r in state.revalidations if r.survived]
    return survived[-1].candidate_id if survived else None


def live_changes(state: RunState) -> list[IntegrityFlagged]:
    """The user's files recorded as changed during the run (files:live-changed: flagged on the
    baseline, whose files they are; tlxdb cannot tell who changed them), first seen first."""
    base = state.candidates.get(BASELINE_ID)
    return [f for f in base.flags if f.guard == LIVE_CHANGED] if base is not None else []


def kept_not_committed(state: RunState, winner_id: str) -> str | None:
    """The one line a run ends with when its winner is kept in the output folder because a
    user's file changed during the run, naming the first file; None when none changed."""
    changed = live_changes(state)
    if not changed:
        return None
    more = f" (and {len(changed) - 1} more changed file(s))" if len(changed) > 1 else ""
    return (
        f"winner {winner_id} kept in the output folder (best_kernel.py), not committed: "
        f"{changed[0].detail}{more}"
    )


def result_from_state(state: RunState, output_dir: Path, store: str | Path) -> RunResult:
    assert state.run_id is not None
    fin = state.finished
    win = winner(state)
    rev = next((r for r in reversed(state.revalidations) if r.candidate_id == win), None)
    base = state.candidates.get(BASELINE_ID)
    final = case_numbers(state.candidates[win], Phase.REVALIDATION) if win else []
    commit = state.commits[-1] if state.commits else None
    return RunResult(
        run_id=state.run_id,
        output_dir=str(output_dir),
        store=str(store),
        stopping_reason=fin.stopping_reason if fin else None,
        success=bool(fin and fin.success),
        detail=fin.detail if fin else "",
        baseline=case_numbers(base, Phase.VALIDATION) if base else [],
        final=final or (case_numbers(base, Phase.VALIDATION) if base else []),
        speedup=rev.speedup if rev else None,
        ci_low=rev.ci_low if rev else None,
        ci_high=rev.ci_high if rev else None,
        winner_id=win,
        commit=None
        if commit is None
        else CommitResult(
            vcs=commit.vcs,
            success=commit.success,
            conflict=commit.conflict,
            rev_after=commit.rev_after,
            subject=commit.subject,
            diagnostics=commit.diagnostics,
        ),
        experiments=[_experiment(c) for cid, c in state.candidates.items() if cid != BASELINE_ID],
        changed_files=[f.detail for f in live_changes(state)],
    )
