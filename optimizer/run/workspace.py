"""A run's private temporary workspace.

Invariants:
- Candidate sources live only here and in the output folder; the user's files are never
  written by a run (committing the winner is a separate, explicit step).
- `bundle/` is the frozen read-only copy of the bundle; `candidates/<id>/` is where a provider
  (e.g. an external agent) may work on one candidate.
- `close()` removes everything, read-only files included.
"""

from __future__ import annotations

import shutil
import stat
import tempfile
from pathlib import Path
from types import TracebackType


class Workspace:
    def __init__(self, parent: Path | None = None) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="tlxdb-", dir=parent))

    @property
    def bundle_dir(self) -> Path:
        return self.root / "bundle"

    @property
    def scratch_dir(self) -> Path:
        """Files tlxdb writes before the output folder exists (the validation log)."""
        d = self.root / "scratch"
        d.mkdir(exist_ok=True)
        return d

    def candidate_dir(self, candidate_id: str) -> Path:
        d = self.root / "candidates" / candidate_id
        d.mkdir(parents=True, exist_ok=True)
        return d

    def close(self) -> None:
        if not self.root.exists():
            return
        for p in self.root.rglob("*"):
            if not p.is_symlink():
                p.chmod(p.stat().st_mode | stat.S_IWUSR)
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Workspace:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
