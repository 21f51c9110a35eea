"""Writing a file in one rename (a reader sees the old text or the new, never part), secrets
masked: the output folder's files and the reports are written this way. On the ground floor of
optimizer/: every room may use it, it uses none."""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

from tlxstore.redaction import Redactor


def write_atomic(path: Path, text: str) -> None:
    """Write `text`, secrets masked (tlxstore/redaction.py), as `path` in one rename."""
    text = Redactor.from_environment().text(text)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _new_beside(path)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _new_beside(path: Path) -> tuple[int, str]:
    """A new file beside `path` for writing it in one rename, open for writing, with the
    permissions the umask gives any new file (a report others read is 0644 under umask 022;
    mkstemp's files are 0600)."""
    while True:
        tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}"
        with contextlib.suppress(FileExistsError):
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), str(tmp)
