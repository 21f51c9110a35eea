"""tlxdb's own version, as the evidence records it (RunStarted.tool_versions, export manifests).

A version number alone does not name the code that ran: an editable install says "0.1.0" at every
commit, and a source tree put on PYTHONPATH (how the GPU machine runs tlxdb) has no version at all.
So the version carries a digest of tlxdb's own files: "0.1.0+src.3f2a9c1d0b7e" installed,
"unknown+src.3f2a9c1d0b7e" from a bare source tree.
"""

from __future__ import annotations

import hashlib
from functools import cache
from importlib import metadata
from pathlib import Path

PACKAGES = ("tlxstore", "optimizer", "profilers", "importers", "queries", "cli")
SOURCE_SUFFIXES = frozenset({".py", ".sql", ".j2", ".md", ".json", ".toml"})


def source_digest(root: Path, packages: tuple[str, ...] = PACKAGES) -> str:
    """12 hex digits of the sha256 over the source files of `packages` under `root` (relative
    path and bytes of each, in path order; caches and other suffixes left out)."""
    h = hashlib.sha256()
    for package in packages:
        base = root / package
        files = sorted(
            p
            for p in base.rglob("*")
            if p.is_file() and p.suffix in SOURCE_SUFFIXES and "__pycache__" not in p.parts
        )
        for path in files:
            h.update(path.relative_to(root).as_posix().encode() + b"\0")
            h.update(path.read_bytes() + b"\0")
    return h.hexdigest()[:12]


@cache
def tlxdb_version() -> str:
    """The installed distribution's version (or "unknown"), plus "+src.<digest>" of this
    process's tlxdb files. Computed once per process."""
    try:
        number = metadata.version("tlxdb")
    except metadata.PackageNotFoundError:
        number = "unknown"
    return f"{number}+src.{source_digest(Path(__file__).resolve().parent.parent)}"
