"""Human-readable views of a run: the live log lines, the timeline, and the Markdown/HTML report.

All functions are pure (a folded run in, text out). Plots are inline SVG written here rather than
matplotlib: the HTML report is one self-contained file, deterministic byte for byte, and tlxdb
does not pull a plotting stack (and its import time) onto GPU hosts for two simple charts.
Kernel source text never appears in a live log line.
"""

from __future__ import annotations

import html
import math
from pathlib import Path

from optimizer import stats
from optimizer.output import RunResult, case_numbers, result_from_state, write_atomic
from tlxstore.errors import UnknownRunError
from tlxstore.events import (
    BenchmarkSampled,
    BuildFinished,
    BundleValidated,
    CandidateProposed,
    CaseVerified,
    CommitAttempted,
    DecisionMade,
    DuplicateDetected,
    Envelope,
    ExclusionRecorded,
    FinalistRevalidated,
    InfrastructureFailed,
    IntegrityFlagged,
    ModelExchanged,
    Phase,
    ProfileCollected,
    RunFinished,
    RunStarted,
    SearchEnded,
)
from tlxstore.fold import CandidateState, RunState, fold

BASELINE_ID = "baseline"


def _ci(speedup: float | None, lo: float | None, hi: float | None) -> str:
    if speedup is None:
        return "n/a"
    ci = f" [{lo:.3f}, {hi:.3f}]" if lo is not None and hi is not None else ""
    return f"{speedup:.3f}x{ci}"


def _one(text: str) -> str:
    return " ".join(text.split())


def _profile_line(e: ProfileCollected, state: RunState) -> str:
    base = state.candidates.get(BASELINE_ID)
    base_metrics = {
        m.name: m.value
        for p in (base.profiles if base else [])
        if p.case_id == e.case_id
        for m in p.metrics
    }
    parts = []
    for m in e.metrics[:4]:
        if m.value is None:
            parts.append(f"{m.name}=null")
            continue
        delta = ""
        b = base_metrics.get(m.name)
        if b and e.candidate_id != BASELINE_ID:
            delta = f" ({(m.value - b) / b:+.1%} vs baseline)"
        parts.append(f"{m.name}={m.value:.4g}{m.unit and ' ' + m.unit}{delta}")
    kernels = ", ".join(e.kernel_names) or "no kernel"
    return f"{e.candidate_id} profile {e.case_id}: time in {kernels}; " + "; ".join(parts)


def describe(env: Envelope, state: RunState) -> str | None:
    """One readable line for an event of the live log, or None for events not worth a line."""
    e = env.event
    match e:
        case RunStarted():
            t = e.thresholds
            return (
                f"run {env.run_id} on {e.device.kind}: provider {e.provider}{' / ' + e.model if e.model else ''}, "
                f"{t.max_rounds} rounds x {t.candidates_per_round}, min speedup {t.min_speedup}, max CV {t.max_cv}"
            )
        case BundleValidated():
            failed = [c for c in e.checks if not c.passed]
            if failed:
                return f"validation failed: {failed[0].name}: {failed[0].detail}"
            return "validation passed: " + "; ".join(f"{c.name} ok" for c in e.checks)
        case CandidateProposed() if e.candidate_id != BASELINE_ID:
            return (
                f"{e.candidate_id} (round {e.round}, parent {e.parent_id}) hypothesis: {_one(e.hypothesis)}"
                f"{' | evidence: ' + _one(e.evidence) if e.evidence else ''} | change: {_one(e.change) or 'n/a'}"
                f" | expected: {_one(e.expected_effect) or 'n/a'} | risk: {_one(e.risk) or 'n/a'}"
            )
        case DuplicateDetected():
            return f"{e.candidate_id} duplicate ({e.match} hash) of {e.duplicate_of_run}/{e.duplicate_of_candidate}"
        case BuildFinished():
            ok = "built" if e.success else f"build FAILED: {_one(e.diagnostics)[-200:]}"
            return f"{e.candidate_id} {ok} in {e.duration_ms:.0f} ms"
        case CaseVerified():
            verdict = "correct" if e.passed else f"INCORRECT: {_one(e.diagnostics)[-200:]}"
            return f"{e.candidate_id} verify {e.case_id} (attempt {e.attempt}): {verdict}"
        case BenchmarkSampled():
            s = e.samples_us
            if not s:
                return None
            block = f" block {e.block}" if e.phase == Phase.REVALIDATION else ""
            return (
                f"{e.candidate_id} bench {e.case_id}{block}: median {stats.median(s):.1f} us, "
                f"p95 {stats.p95(s):.1f} us, CV {stats.cv(s):.3f} ({len(s)} samples)"
            )
        case ProfileCollected():
            return _profile_line(e, state)
        case IntegrityFlagged():
            return f"{e.candidate_id} {'BLOCKED' if e.blocking else 'flagged'} by {e.guard}: {_one(e.detail)}"
        case InfrastructureFailed():
            who = e.candidate_id or "provider"
            return f"{who} {e.kind.value} during {e.stage}: {_one(e.diagnostics)[-200:]}"
        case DecisionMade():
            return (
                f"{e.candidate_id} {e.outcome.value.upper()}: speedup {_ci(e.speedup, e.ci_low, e.ci_high)}"
                f" — {_one(e.reason)}"
            )
        case ExclusionRecorded():
            return f"{e.candidate_id} excluded: {e.signature} ({e.outcome.value})"
        case FinalistRevalidated():
            verdict = "survived" if e.survived else "did NOT survive"
            return (
                f"{e.candidate_id} {verdict} final revalidation ({e.alternations} alternations): "
                f"speedup {_ci(e.speedup, e.ci_low, e.ci_high)} — {_one(e.reason)}"
            )
        case CommitAttempted():
            if e.success:
                return f"committed {e.candidate_id} as {e.rev_after}: {e.subject}"
            return f"commit of {e.candidate_id} FAILED{' (conflict)' if e.conflict else ''}: {_one(e.diagnostics)}"
        case ModelExchanged():
            tokens = f", {e.tokens_in}+{e.tokens_out} tokens" if e.tokens_in is not None else ""
            return (
                f"model exchange {e.exchange_id} ({e.model or e.provider}, {e.latency_ms:.0f} ms{tokens})"
                + (f": error {e.error}" if e.error else "")
            )
        case SearchEnded():
            return f"search ended: {e.reason.value}{' — ' + _one(e.detail) if e.detail else ''}"
        case RunFinished():
            win = f", winner {e.winner_id} at {e.speedup:.3f}x" if e.winner_id and e.speedup else ""
            return (
                f"run finished: {e.stopping_reason.value}{win}"
                f"{' — ' + _one(e.detail) if e.detail else ''}{_timing_label(state)}"
            )
    return None


def _timing_label(state: RunState) -> str:
    """CPU timings are the Triton interpreter's: say so wherever a speedup is reported."""
    device = state.started.device if state.started else None
    if device is not None and device.backend == "cpu":
        return " (timings measure the Triton interpreter on the CPU, not a GPU)"
    return ""


def timeline(envelopes: list[Envelope]) -> list[str]:
    """Every event worth a line, in order, as `tlxdb show` prints it."""
    state = RunState()
    lines = []
    for env in envelopes:
        state.apply(env)
        line = describe(env, state)
        if line is not None:
            lines.append(f"{env.seq:>5}  {env.recorded_at:%H:%M:%S}  {line}")
    return lines


# ---- the report -----------------------------------------------------------------------------


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    def esc(cell: str) -> str:
        return cell.replace("|", "\\|").replace("\n", " ")

    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def _experiment_rows(result: RunResult) -> list[list[str]]:
    return [
        [
            x.candidate_id,
            str(x.round),
            x.parent_id or "",
            _one(x.hypothesis),
            _one(x.change),
            x.outcome.value if x.outcome else "undecided",
            _ci(x.speedup, x.ci_low, x.ci_high),
            _one(x.reason),
        ]
        for x in result.experiments
    ]


def markdown_report(state: RunState, result: RunResult) -> str:
    s = state.started
    lines = [f"# tlxdb run {result.run_id}", ""]
    if s is not None:
        t = s.thresholds
        lines += [
            f"- kernel: `{s.kernel_path}` ({s.kernel_sha256})",
            f"- device: {s.device.kind} ({s.device.backend}, {s.device.architecture or 'unknown arch'})"
            f"{_timing_label(state)}",
            f"- tools: triton {s.tool_versions.triton}, torch {s.tool_versions.torch}, tlxdb {s.tool_versions.tlxdb}",
            f"- provider: {s.provider}{' / ' + s.model if s.model else ''}",
            f"- budget: {t.max_rounds} rounds x {t.candidates_per_round} candidates, min speedup {t.min_speedup}, "
            f"max CV {t.max_cv}, {t.benchmark_repetitions} repetitions",
        ]
    lines += [
        f"- stopping reason: {result.stopping_reason.value if result.stopping_reason else 'still running'}",
        f"- winner: {result.winner_id or 'none'}"
        + (
            f", speedup {_ci(result.speedup, result.ci_low, result.ci_high)} (final revalidation)"
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
    final = {c.case_id: c for c in result.final}
    lines += ["", "## Cases (median / p95 in us)", ""]
    lines.append(
        _md_table(
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
        _md_table(
            ["id", "round", "parent", "hypothesis", "change", "outcome", "speedup [CI]", "reason"],
            _experiment_rows(result),
        )
    )
    excl = [c.exclusion for c in state.candidates.values() if c.exclusion is not None]
    if excl:
        lines += ["", "## Exclusions", ""]
        lines.append(
            _md_table(
                ["candidate", "signature", "outcome", "reason"],
                [[e.candidate_id, e.signature, e.outcome.value, _one(e.reason)] for e in excl],
            )
        )
    return "\n".join(lines) + "\n"


# ---- SVG plots --------------------------------------------------------------------------------

_W, _H, _PAD = 640, 240, 40


def _svg(body: list[str], title: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" role="img" '
        f'aria-label="{html.escape(title)}"><title>{html.escape(title)}</title>'
        + "".join(body)
        + "</svg>"
    )


def speedup_chart(result: RunResult, min_speedup: float) -> str:
    """Bars of each decided candidate's speedup with its interval; lines at 1.0 and min_speedup."""
    xs = [x for x in result.experiments if x.speedup is not None]
    title = "speedup per candidate vs baseline"
    if not xs:
        return _svg([f'<text x="{_PAD}" y="{_H / 2}">no measured candidates</text>'], title)
    top = max([x.ci_high or x.speedup or 1.0 for x in xs] + [min_speedup, 1.0]) * 1.1
    span = _H - 2 * _PAD
    bw = (_W - 2 * _PAD) / len(xs)

    def y(v: float) -> float:
        return _H - _PAD - span * v / top

    body = []
    for i, x in enumerate(xs):
        x0 = _PAD + i * bw
        color = {
            "promoted": "#2a9d4b",
            "rejected": "#999",
            "failed": "#c0392b",
            "duplicate": "#88a",
        }.get(x.outcome.value if x.outcome else "", "#555")
        body.append(
            f'<rect x="{x0 + bw * 0.15:.1f}" y="{y(x.speedup or 0):.1f}" width="{bw * 0.7:.1f}" '
            f'height="{_H - _PAD - y(x.speedup or 0):.1f}" fill="{color}"><title>{x.candidate_id}: '
            f"{_ci(x.speedup, x.ci_low, x.ci_high)}</title></rect>"
        )
        if x.ci_low is not None and x.ci_high is not None:
            cx = x0 + bw / 2
            body.append(
                f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{y(x.ci_low):.1f}" y2="{y(x.ci_high):.1f}" stroke="#000"/>'
            )
        body.append(
            f'<text x="{x0 + bw / 2:.1f}" y="{_H - _PAD + 14}" font-size="10" text-anchor="middle">'
            f"{x.candidate_id}</text>"
        )
    for v, dash in ((1.0, ""), (min_speedup, ' stroke-dasharray="4"')):
        body.append(
            f'<line x1="{_PAD}" x2="{_W - _PAD}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#333"{dash}/>'
            f'<text x="2" y="{y(v) + 4:.1f}" font-size="10">{v:g}x</text>'
        )
    return _svg(body, title)


def samples_chart(state: RunState, winner_id: str | None) -> str:
    """Every benchmark sample per case (log time axis): baseline vs the winner's revalidation."""
    base = state.candidates.get(BASELINE_ID)
    series: list[tuple[str, str, list[float]]] = []
    if base is not None:
        for case_id, s in base.samples_by_case(Phase.VALIDATION).items():
            series.append((f"baseline {case_id}", "#c0392b", s))
    if winner_id:
        for case_id, s in state.candidates[winner_id].samples_by_case(Phase.REVALIDATION).items():
            series.append((f"{winner_id} {case_id}", "#2a9d4b", s))
    title = "benchmark samples (us, log scale)"
    values = [v for _, _, s in series for v in s if v > 0]
    if not values:
        return _svg([f'<text x="{_PAD}" y="{_H / 2}">no samples</text>'], title)
    lo, hi = math.log10(min(values)), math.log10(max(values))
    hi = hi if hi > lo else lo + 1
    row_h = (_H - 2 * _PAD) / len(series)
    body = []
    for i, (label, color, s) in enumerate(series):
        yc = _PAD + row_h * (i + 0.5)
        body.append(f'<text x="2" y="{yc + 3:.1f}" font-size="10">{html.escape(label)}</text>')
        for v in s:
            x = 150 + (_W - 150 - _PAD) * (math.log10(v) - lo) / (hi - lo)
            body.append(
                f'<circle cx="{x:.1f}" cy="{yc:.1f}" r="2.5" fill="{color}" fill-opacity="0.6"/>'
            )
    body.append(
        f'<text x="150" y="{_H - 8}" font-size="10">{10**lo:.4g} us</text>'
        f'<text x="{_W - _PAD}" y="{_H - 8}" font-size="10" text-anchor="end">{10**hi:.4g} us</text>'
    )
    return _svg(body, title)


def html_report(state: RunState, result: RunResult) -> str:
    """The Markdown report's content as one self-contained HTML page with the two charts."""
    s = state.started
    min_speedup = s.thresholds.min_speedup if s else 1.0

    def table(header: list[str], rows: list[list[str]]) -> str:
        head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    cases = [
        [c.case_id, f"{c.median_us:.2f}", f"{c.p95_us:.2f}", f"{c.cv:.3f}", str(c.samples)]
        for c in result.baseline
    ]
    final = [
        [c.case_id, f"{c.median_us:.2f}", f"{c.p95_us:.2f}", f"{c.cv:.3f}", str(c.samples)]
        for c in result.final
    ]
    summary = (
        f"stopping reason: {result.stopping_reason.value if result.stopping_reason else 'running'}; "
        f"winner: {result.winner_id or 'none'}; speedup {_ci(result.speedup, result.ci_low, result.ci_high)}"
    )
    return (
        "\n".join(
            [
                "<!doctype html>",
                f"<html><head><meta charset='utf-8'><title>tlxdb run {html.escape(result.run_id)}</title>",
                "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto}table{border-collapse:collapse}"
                "td,th{border:1px solid #ccc;padding:3px 6px;font-size:13px;text-align:left}</style></head><body>",
                f"<h1>tlxdb run {html.escape(result.run_id)}</h1>",
                f"<p>{html.escape(summary)}</p>",
                f"<p>device: {html.escape(s.device.kind if s else '?')}; provider: {html.escape(s.provider if s else '?')}</p>",
                "<h2>Speedup per candidate</h2>",
                speedup_chart(result, min_speedup),
                "<h2>Samples</h2>",
                samples_chart(state, result.winner_id),
                "<h2>Baseline (us)</h2>",
                table(["case", "median", "p95", "CV", "samples"], cases),
                "<h2>Final (us)</h2>",
                table(["case", "median", "p95", "CV", "samples"], final),
                "<h2>Experiments</h2>",
                table(
                    [
                        "id",
                        "round",
                        "parent",
                        "hypothesis",
                        "change",
                        "outcome",
                        "speedup [CI]",
                        "reason",
                    ],
                    _experiment_rows(result),
                ),
                "</body></html>",
            ]
        )
        + "\n"
    )


def candidate_numbers(c: CandidateState) -> str:
    """median/p95/CV per case of one candidate, one line (for `tlxdb show`)."""
    return "; ".join(
        f"{n.case_id} {n.median_us:.1f}/{n.p95_us:.1f} us CV {n.cv:.3f}"
        for n in case_numbers(c, None)
    )


def write_reports(envelopes: list[Envelope], store: Path, to_dir: Path | None = None) -> list[Path]:
    """Write report.md and report.html for a run (default: into its output folder, when it exists)."""
    state = fold(envelopes)
    if state.started is None:
        raise UnknownRunError("the run has no start record; nothing to report")
    out_dir = Path(state.started.output_dir)
    target = to_dir or (out_dir if out_dir.is_dir() else Path.cwd())
    result = result_from_state(state, out_dir, store)
    md, page = target / "report.md", target / "report.html"
    write_atomic(md, markdown_report(state, result))
    write_atomic(page, html_report(state, result))
    return [md, page]
