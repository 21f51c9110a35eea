"""The Markdown report of one run."""

from __future__ import annotations

from optimizer.reporting.live import ci_text, one_line, timing_label
from optimizer.reporting.result import RunResult
from tlxstore.fold import RunState


def md_table(header: list[str], rows: list[list[str]]) -> str:
    def esc(cell: str) -> str:
        return cell.replace("|", "\\|").replace("\n", " ")

    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def experiment_rows(result: RunResult) -> list[list[str]]:
    return [
        [
            x.candidate_id,
            str(x.round),
            x.parent_id or "",
            one_line(x.hypothesis),
            one_line(x.change),
            x.outcome.value if x.outcome else "undecided",
            ci_text(x.speedup, x.ci_low, x.ci_high),
            one_line(x.reason),
        ]
        for x in result.experiments
    ]


def validation_section(state: RunState) -> list[str]:
    """The bundle's validation: every check's outcome, warnings spelled out."""
    v = state.validation
    if v is None:
        return []
    head = f"{'passed' if v.passed else 'failed'}{' (--strict-validation)' if v.strict else ''}"
    return [
        "",
        f"## Validation: {head}, {len(v.warnings)} warning(s)",
        "",
        md_table(
            ["check", "outcome", "detail"],
            [[c.name, c.outcome.value, one_line(c.detail)] for c in v.checks],
        ),
    ]


def changed_files_section(state: RunState) -> list[str]:
    """Every file seen changed outside the run's workspace: the user's kernel and bundle files
    (files:live-changed, on the baseline) and the run's private copy (files:changed, on the
    candidate it blocked)."""
    flags = [f for c in state.candidates.values() for f in c.flags if f.guard.startswith("files:")]
    if not flags:
        return []
    return [
        "",
        f"## Files changed during the run: {len(flags)}",
        "",
        md_table(
            ["candidate", "guard", "blocking", "detail"],
            [
                [f.candidate_id, f.guard, "yes" if f.blocking else "no", one_line(f.detail)]
                for f in flags
            ],
        ),
    ]


def markdown_report(state: RunState, result: RunResult) -> str:
    s = state.started
    lines = [f"# tlxdb run {result.run_id}", ""]
    if s is not None:
        t = s.thresholds
        lines += [
            f"- kernel: `{s.kernel_path}` ({s.kernel_sha256})",
            f"- device: {s.device.kind} ({s.device.backend}, {s.device.architecture or 'unknown arch'})"
            f"{timing_label(state)}",
            f"- tools: triton {s.tool_versions.triton}, torch {s.tool_versions.torch}, tlxdb {s.tool_versions.tlxdb}",
            f"- provider: {s.provider}{' / ' + s.model if s.model else ''}",
            f"- budget: {t.max_rounds} rounds x {t.candidates_per_round} candidates, min speedup {t.min_speedup}, "
            f"max CV {t.max_cv}, {t.benchmark_repetitions} repetitions",
        ]
    lines += [
        f"- stopping reason: {result.stopping_reason.value if result.stopping_reason else 'still running'}",
        f"- winner: {result.winner_id or 'none'}"
        + (
            f", speedup {ci_text(result.speedup, result.ci_low, result.ci_high)} (final revalidation)"
            if result.winner_id
            else ""
        ),
    ]
    if result.detail:
        lines.append(f"- detail: {result.detail}")
    if result.commit is not None:
        c = result.commit
        lines.append(
            f"- commit: {'ok ' + (c.rev_after or '') if c.success else 'failed: ' + c.diagnostics}"
        )
    lines += validation_section(state)
    lines += changed_files_section(state)
    final = {c.case_id: c for c in result.final}
    lines += ["", "## Cases (median / p95 in us)", ""]
    lines.append(
        md_table(
            [
                "case",
                "baseline median",
                "baseline p95",
                "baseline CV",
                "final median",
                "final p95",
                "final CV",
            ],
            [
                [
                    b.case_id,
                    f"{b.median_us:.2f}",
                    f"{b.p95_us:.2f}",
                    f"{b.cv:.3f}",
                    f"{final[b.case_id].median_us:.2f}" if b.case_id in final else "",
                    f"{final[b.case_id].p95_us:.2f}" if b.case_id in final else "",
                    f"{final[b.case_id].cv:.3f}" if b.case_id in final else "",
                ]
                for b in result.baseline
            ],
        )
    )
    lines += ["", "## Experiments", ""]
    lines.append(
        md_table(
            ["id", "round", "parent", "hypothesis", "change", "outcome", "speedup [CI]", "reason"],
            experiment_rows(result),
        )
    )
    excl = [c.exclusion for c in state.candidates.values() if c.exclusion is not None]
    if excl:
        lines += ["", "## Exclusions", ""]
        lines.append(
            md_table(
                ["candidate", "signature", "outcome", "reason"],
                [[e.candidate_id, e.signature, e.outcome.value, one_line(e.reason)] for e in excl],
            )
        )
    return "\n".join(lines) + "\n"


# ---- SVG plots --------------------------------------------------------------------------------
