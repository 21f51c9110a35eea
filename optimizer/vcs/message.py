"""The message of a winner's commit: subject, change summary, per-case table, aggregate.

Invariants:
- The subject is one line: `--commit-message`, else the candidate's commit title, else a default
  that names the kernel.
- The body carries the change summary, a table (case, baseline us, winner us, speedup, CVs) and
  the weighted aggregate speedup with its interval.
- The message ends with the line `TLX agent authored`, which appears exactly once (a copy inside
  the subject or the summary is dropped).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tlxstore.events import CandidateProposed, CaseSpeedup

TRAILER = "TLX agent authored"
_MISSING = "n/a"


def commit_subject(
    kernel_path: str | Path,
    *,
    commit_message: str | None = None,
    commit_title: str | None = None,
    speedup: float | None = None,
) -> str:
    """The subject line: the user's message, else the candidate's title, else a default."""
    for given in (commit_message, commit_title):
        line = _first_line(given)
        if line:
            return line
    name = Path(kernel_path).name
    if speedup is not None:
        return f"Speed up {name} by {speedup:.3f}x (tlxdb)"
    return f"Optimize {name} (tlxdb)"


def change_summary(proposal: CandidateProposed) -> str:
    """The change summary when the candidate gave none: its hypothesis, change, expected effect
    and risk, one labelled line each."""
    fields = [
        ("Hypothesis", proposal.hypothesis),
        ("Change", proposal.change),
        ("Expected effect", proposal.expected_effect),
        ("Risk", proposal.risk),
    ]
    return "\n".join(f"{label}: {' '.join(text.split())}" for label, text in fields if text.strip())


def render_commit_message(
    subject: str,
    *,
    summary: str = "",
    cases: Sequence[CaseSpeedup] = (),
    speedup: float | None = None,
    ci_low: float | None = None,
    ci_high: float | None = None,
) -> str:
    """The full commit message, ending with the trailer line."""
    parts = [_first_line(subject) or "Optimize kernel (tlxdb)"]
    summary_lines = [ln.rstrip() for ln in summary.strip().splitlines() if ln.strip() != TRAILER]
    if any(summary_lines):
        parts.append("\n".join(summary_lines).strip())
    if cases:
        parts.append(performance_table(cases))
    if speedup is not None:
        parts.append(aggregate_line(speedup, ci_low, ci_high))
    parts.append(TRAILER)
    return "\n\n".join(parts) + "\n"


def performance_table(cases: Sequence[CaseSpeedup]) -> str:
    """A fixed-width table: case, baseline us, winner us, speedup, baseline CV, winner CV."""
    header = ["case", "baseline us", "winner us", "speedup", "baseline CV", "winner CV"]
    rows = [
        [
            c.case_id,
            f"{c.baseline_median_us:.3f}",
            f"{c.candidate_median_us:.3f}",
            f"{c.speedup:.3f}x",
            _percent(c.baseline_cv),
            _percent(c.candidate_cv),
        ]
        for c in cases
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def fmt(row: list[str]) -> str:
        first = row[0].ljust(widths[0])
        rest = [cell.rjust(w) for cell, w in zip(row[1:], widths[1:], strict=True)]
        return "  ".join([first, *rest]).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([fmt(header), rule, *(fmt(r) for r in rows)])


def aggregate_line(speedup: float, ci_low: float | None, ci_high: float | None) -> str:
    """The weighted geometric-mean speedup, with its confidence interval when known."""
    line = f"Weighted geometric-mean speedup: {speedup:.3f}x"
    if ci_low is not None and ci_high is not None:
        line += f" (confidence interval {ci_low:.3f}x to {ci_high:.3f}x)"
    return line


def _percent(cv: float | None) -> str:
    return _MISSING if cv is None else f"{cv * 100:.2f}%"


def _first_line(text: str | None) -> str:
    if not text:
        return ""
    for line in text.splitlines():
        line = " ".join(line.split())
        if line and line != TRAILER:
            return line
    return ""
