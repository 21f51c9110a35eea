"""File-hash guard: the protected paths (the private bundle copy) must be byte-identical before
and after an evaluation (`files:changed`, blocking). The user's own files (the kernel, the bundle's
originals) are the user's to edit during a run: the loop records a change to one as
`files:live-changed` (non-blocking; optimizer.run.loop)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tlxstore.hashing import digest_file

MISSING = "missing"
LIVE_CHANGED = "files:live-changed"


def hash_paths(paths: Iterable[Path]) -> dict[str, str]:
    """Tagged sha256 of every file under the given files/folders (a path that does not exist
    hashes as "missing", so deleting a file is a change too)."""
    out: dict[str, str] = {}
    for p in paths:
        p = Path(p)
        if p.is_dir():
            for f in sorted(p.rglob("*")):
                if f.is_file() and "__pycache__" not in f.parts:
                    out[str(f)] = digest_file(f)
        elif p.is_file():
            out[str(p)] = digest_file(p)
        else:
            out[str(p)] = MISSING
    return out


def changed_paths(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Paths added, removed or changed between two `hash_paths` results, sorted."""
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
