"""The output folder of a run (docs/CONTRACT.md §3).

Layout:
    <output_dir>/events.jsonl          the run's event log (everything else can be rebuilt from it)
    <output_dir>/run_request.json      what was asked (bundle paths, flags), for --resume
    <output_dir>/best_kernel.py        the revalidated winner, else the baseline
    <output_dir>/result.json           the stdout object
    <output_dir>/report.md             the run's report, from the store's views (as `tlxdb report`),
                                       with report.html and its figures (*.svg) beside it
    <output_dir>/experiments/<id>/kernel.py, incremental.patch, cumulative.patch, profile/
    the TLX agent's files beside them: experiments.json, baseline_profile.json,
    best_profile.json, experiments/<id>/result.json and profile.json (optimizer.run.tlx_files)

Invariants: every file is written atomically (temp file + rename); experiment files are written
when the candidate is proposed, the final files when the run finishes.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import TYPE_CHECKING

from optimizer.atomic import write_atomic
from optimizer.run.tlx_files import tlx_files
from tlxstore.events import BASELINE_ID
from tlxstore.fold import RunState

if TYPE_CHECKING:
    from optimizer.reporting.result import RunResult


def unified_diff(before: str, after: str, before_name: str, after_name: str) -> str:
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            before_name,
            after_name,
        )
    )


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

    def write_tlx(self, state: RunState, winner_id: str | None, baseline_source: str) -> None:
        """The TLX agent's files (optimizer.run.tlx_files), rewritten whole each time."""
        write_atomic(self.experiment_dir(BASELINE_ID) / "kernel.py", baseline_source)
        for rel, value in tlx_files(state, self.root, winner_id).items():
            write_atomic(self.root / rel, json.dumps(value, indent=2, sort_keys=True) + "\n")

    def write_final(self, result: RunResult, best_source: str) -> None:
        """best_kernel.py and result.json; the report is written from the store once the run's
        events are in it (optimizer.reporting.from_views.write_run_report)."""
        write_atomic(self.root / "best_kernel.py", best_source)
        write_atomic(self.root / "result.json", result.model_dump_json(indent=2) + "\n")
