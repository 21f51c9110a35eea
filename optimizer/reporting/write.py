"""Writing a run's Markdown and HTML reports to disk."""

from __future__ import annotations

from pathlib import Path

from optimizer.reporting.html import html_report
from optimizer.reporting.markdown import markdown_report
from optimizer.reporting.result import result_from_state
from optimizer.run.folder import write_atomic
from tlxstore.errors import UnknownRunError
from tlxstore.events import (
    Envelope,
)
from tlxstore.fold import fold


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
