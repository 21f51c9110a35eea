"""A run's private temporary workspace.

Invariants:
- Candidate sources live only here and in the output folder; the user's files are never
  written by a run (committing the winner is a separate, explicit step).
- `bundle/` is the frozen read-only copy of the bundle; `candidates/<id>/` is where a provider
  (e.g. an external agent) may work on one candidate.
- `close()` removes everything, read-only files included.
- A run's workspace is recorded in its output folder (`<output>/.workspace`, `record`) while the
  run holds its lease; `close()` removes the record. A record left behind is a writer killed
  before it could clean up: `--resume`, holding the lease (so that writer is gone), removes what
  it names (`remove_recorded`).
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path
from types import TracebackType

PREFIX = "tlxdb-"
WORKSPACE_FILE = ".workspace"


def _remove(root: Path) -> None:
    for p in root.rglob("*"):
        if not p.is_symlink():
            p.chmod(p.stat().st_mode | stat.S_IWUSR)
    shutil.rmtree(root, ignore_errors=True)


class Workspace:
    def __init__(self, parent: Path | None = None) -> None:
        self.root = Path(tempfile.mkdtemp(prefix=PREFIX, dir=parent))
        self._record: Path | None = None

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

    def record(self, out: Path) -> None:
        """Write this workspace's path into the run's output folder `out` (call it under the
        run's lease), so a resume can remove it should this process be killed."""
        path = out / WORKSPACE_FILE
        tmp = out / f".{WORKSPACE_FILE}.{os.getpid()}"
        tmp.write_text(str(self.root) + "\n", encoding="utf-8")
        os.replace(tmp, path)
        self._record = path

    def close(self) -> None:
        if self._record is not None:
            self._record.unlink(missing_ok=True)
            self._record = None
        if self.root.exists():
            _remove(self.root)

    def __enter__(self) -> Workspace:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def remove_recorded(out: Path) -> Path | None:
    """Remove the workspace a killed writer of the run in `out` left behind (its record) and
    return its path; None when there is none. Call it only under the run's lease. The record
    is trusted only as far as it names a tlxdb workspace (a `tlxdb-*` folder holding `bundle/`)."""
    path = out / WORKSPACE_FILE
    try:
        text = path.read_text(encoding="utf-8").strip()
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    root = Path(text)
    removed = None
    if (
        text
        and root.is_absolute()
        and root.name.startswith(PREFIX)
        and not root.is_symlink()
        and (root / "bundle").is_dir()
    ):
        _remove(root)
        removed = root
    path.unlink(missing_ok=True)
    return removed
