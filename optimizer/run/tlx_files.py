"""The TLX agent's files in a tlxdb output folder, from the run's folded events.

A TLX agent given `--prior-run <tlxdb output folder>`, and scripts written for TLX output folders,
read these beside tlxdb's own files (docs/CONTRACT.md §3):

    experiments.json                  every decided candidate as an ExperimentSummary
    experiments/<id>/result.json      its ExperimentSummary (the baseline's: its PerformanceSummary)
    experiments/<id>/profile.json     the harness's profile per case
    baseline_profile.json             the baseline's profile per case
    best_profile.json                 the winner's (else the baseline's) profile per case

Field names and status words are the TLX agent's (statuses baseline | promoted | rejected |
failed; performance.cases[] with verification and timing.samples_us; aggregate_speedup). A
profile is rebuilt from the recorded metrics (name -> value), its kernel names, artifact paths and
diagnostics: the harness's raw dict is not kept as such. Pure: state in, JSON values out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from optimizer.evaluation import attribution
from tlxstore.events import BASELINE_ID, Outcome, Phase
from tlxstore.fold import CandidateState, RunState

_STATUS = {
    Outcome.PROMOTED: "promoted",
    Outcome.REJECTED: "rejected",
    Outcome.FAILED: "failed",
    Outcome.DUPLICATE: "failed",
}
_DECISION = {Outcome.PROMOTED: "promote", Outcome.REJECTED: "retry"}


def _phase(c: CandidateState) -> Phase:
    return Phase.VALIDATION if c.candidate_id == BASELINE_ID else Phase.ROUND


def _case_profiles(c: CandidateState) -> dict[str, dict[str, Any]]:
    """The profile of each case (tlxdb's own launch attribution is not a profile of the case)."""
    out: dict[str, dict[str, Any]] = {}
    for p in c.profiles:
        if attribution.is_attribution(p):
            continue
        profile: dict[str, Any] = {m.name: m.value for m in p.metrics}
        if p.kernel_names:
            profile["kernel_names"] = list(p.kernel_names)
        if p.artifacts:
            profile["artifacts"] = list(p.artifacts)
        if p.diagnostics:
            profile["diagnostics"] = p.diagnostics
        out[p.case_id] = profile
    return out


def _case(c: CandidateState, case_id: str, profile: dict[str, Any]) -> dict[str, Any]:
    phase = _phase(c)
    checks = [v for v in c.verifications if v.case_id == case_id and v.phase == phase]
    runs = [s for s in c.samples if s.case_id == case_id and s.phase == phase]
    samples = [x for s in runs for x in s.samples_us]
    timing = None
    if samples:
        timing = {
            "samples_us": samples,
            "warmup_count": runs[-1].warmup_count or 0,
            "cache_policy": runs[-1].cache_policy or "unspecified",
        }
    return {
        "case_id": case_id,
        "verification": {
            "passed": bool(checks) and all(v.passed for v in checks),
            "diagnostics": checks[-1].diagnostics if checks else "",
            "metrics": dict(checks[-1].metrics) if checks else {},
        },
        "timing": timing,
        "profile": profile,
    }


def performance(c: CandidateState) -> dict[str, Any]:
    """The candidate's PerformanceSummary: per case verification, timing and profile."""
    phase = _phase(c)
    case_ids = list(
        dict.fromkeys(
            [v.case_id for v in c.verifications if v.phase == phase]
            + [s.case_id for s in c.samples if s.phase == phase]
        )
    )
    profiles = _case_profiles(c)
    speedup = 1.0 if c.candidate_id == BASELINE_ID else None
    if c.decision is not None and c.decision.speedup is not None:
        speedup = c.decision.speedup
    return {
        "cases": [_case(c, case_id, profiles.get(case_id, {})) for case_id in case_ids],
        "aggregate_speedup": speedup if speedup is not None else 0.0,
    }


def experiment_summary(c: CandidateState, root: Path) -> dict[str, Any]:
    """One decided candidate as the TLX agent's ExperimentSummary."""
    p, d = c.proposal, c.decision
    folder = root / "experiments" / c.candidate_id
    base = c.candidate_id == BASELINE_ID
    status = "baseline" if base else _STATUS[d.outcome] if d else "failed"
    summary: dict[str, Any] = {
        "experiment_id": c.candidate_id,
        "round_index": p.round,
        "parent_id": p.parent_id,
        "status": status,
        "source_path": str(folder / "kernel.py"),
        "incremental_patch_path": None if base else str(folder / "incremental.patch"),
        "cumulative_patch_path": None if base else str(folder / "cumulative.patch"),
        "performance": performance(c),
        "diagnostics": "" if base or d is None else d.reason,
        "mutation_summary": p.change,
        "hypothesis": p.hypothesis,
        "evidence": p.evidence,
        "expected_effect": p.expected_effect,
        "risk": p.risk,
        "commit_title": p.commit_title or "",
        "commit_summary": p.commit_summary or "",
        "profile_path": str(folder / "profile.json"),
        "experiment_kind": "promotable",
    }
    if d is not None and not base and d.outcome in _DECISION:
        summary["decision"] = {"status": _DECISION[d.outcome], "rationale": d.reason}
    return summary


def tlx_files(state: RunState, root: Path, winner_id: str | None) -> dict[str, Any]:
    """Relative path -> JSON value of every TLX agent file of the run's output folder."""
    decided = [
        c
        for c in state.candidates.values()
        if c.candidate_id == BASELINE_ID or c.decision is not None
    ]
    files: dict[str, Any] = {"experiments.json": [experiment_summary(c, root) for c in decided]}
    for c in decided:
        rel = f"experiments/{c.candidate_id}"
        files[f"{rel}/profile.json"] = _case_profiles(c)
        files[f"{rel}/result.json"] = (
            performance(c) if c.candidate_id == BASELINE_ID else experiment_summary(c, root)
        )
    baseline = state.candidates.get(BASELINE_ID)
    if baseline is not None:
        files["baseline_profile.json"] = _case_profiles(baseline)
        best = state.candidates.get(winner_id or BASELINE_ID, baseline)
        files["best_profile.json"] = _case_profiles(best)
    return files
