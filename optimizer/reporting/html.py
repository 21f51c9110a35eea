"""The HTML report of one run, with inline SVG charts.

Plots are inline SVG written here: the HTML report is one self-contained file, deterministic byte
for byte.
"""

from __future__ import annotations

import html
import math

from optimizer.reporting.live import ci_text
from optimizer.reporting.markdown import experiment_rows
from optimizer.reporting.result import RunResult
from tlxstore.events import (
    BASELINE_ID,
    Phase,
)
from tlxstore.fold import RunState

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
            f"{ci_text(x.speedup, x.ci_low, x.ci_high)}</title></rect>"
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
        f"winner: {result.winner_id or 'none'}; speedup {ci_text(result.speedup, result.ci_low, result.ci_high)}"
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
                    experiment_rows(result),
                ),
                "</body></html>",
            ]
        )
        + "\n"
    )
