"""The output folder (CONTRACT.md §3) and the result object printed on stdout.

Layout:
    <output_dir>/events.jsonl          the run's event log (everything else can be rebuilt from it)
    <output_dir>/run_request.json      what was asked (bundle paths, flags), for --resume
    <output_dir>/best_kernel.py        the revalidated winner, else the baseline
    <output_dir>/result.json           the stdout object
    <output_dir>/report.md             the run's report
    <output_dir>/experiments/<id>/kernel.py, incremental.patch, cumulative.patch, profile/

Invariants: every file is written atomically (temp file + rename); experiment files are written
when the candidate is proposed, the final files when the run finishes; `result_from_state` is a
pure function of the folded run.
"""

from __future__ import annotations

import difflib
import os
import tempfile
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from optimizer import stats
from tlxstore.events import Outcome, Phase, StoppingReason
from tlxstore.fold import CandidateState, RunState

EXIT_SUCCESS = 0
EXIT_BAD_INPUT = 1
EXIT_NO_WINNER = 2
EXIT_COMMIT_FAILED = 3
EXIT_INTERRUPTED = 130
BASELINE_ID = "baseline"


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

    @property
    def exit_code(self) -> int:
        if self.stopping_reason == StoppingReason.INTERRUPTED:
            return EXIT_INTERRUPTED
        if self.stopping_reason in (StoppingReason.BUNDLE_CHANGED, StoppingReason.ERROR):
            return EXIT_BAD_INPUT
        if self.commit is not None and not self.commit.success:
            return EXIT_COMMIT_FAILED
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
        CaseNumbers(
            case_id=case_id,
            median_us=stats.median(s),
            p95_us=stats.p95(s),
            cv=stats.cv(s),
            samples=len(s),
        )
        for case_id, s in c.samples_by_case(phase).items()
        if s
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


def result_from_state(state: RunState, output_dir: Path, store: Path) -> RunResult:
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
    )


def unified_diff(before: str, after: str, before_name: str, after_name: str) -> str:
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            before_name,
            after_name,
        )
    )


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class OutputFolder:
    """Writes the artifacts of one run under its output folder."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @property
    def log_path(self) -> Path:
        return self.root / "events.jsonl"

    @property
    def request_path(self) -> Path:
        return self.root / "run_request.json"

    def experiment_dir(self, candidate_id: str) -> Path:
        return self.root / "experiments" / candidate_id

    def artifacts_dir(self, candidate_id: str) -> Path:
        d = self.experiment_dir(candidate_id) / "profile"
        d.mkdir(parents=True, exist_ok=True)
        return d

    def write_experiment(
        self,
        candidate_id: str,
        source: str,
        parent_id: str | None,
        parent_source: str,
        baseline_source: str,
    ) -> None:
        d = self.experiment_dir(candidate_id)
        write_atomic(d / "kernel.py", source)
        write_atomic(
            d / "incremental.patch",
            unified_diff(
                parent_source,
                source,
                f"{parent_id or BASELINE_ID}/kernel.py",
                f"{candidate_id}/kernel.py",
            ),
        )
        write_atomic(
            d / "cumulative.patch",
            unified_diff(
                baseline_source, source, f"{BASELINE_ID}/kernel.py", f"{candidate_id}/kernel.py"
            ),
        )

    def write_final(self, result: RunResult, best_source: str, report_md: str) -> None:
        write_atomic(self.root / "best_kernel.py", best_source)
        write_atomic(self.root / "report.md", report_md)
        write_atomic(self.root / "result.json", result.model_dump_json(indent=2) + "\n")
