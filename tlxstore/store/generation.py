"""The store's generation: a counter in `<store>.gen` that every write bumps, so a process-local
replica (queries/replica.py) or a reader (Store._reading) can tell with one small read, and no
lock, that nothing changed since it last looked. The file is never followed through a symlink
(its target would be overwritten) and must be a regular file; anything else is refused in one
line."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from tlxstore.errors import StoreError


def generation_path(store_path: Path) -> Path:
    return store_path.with_name(store_path.name + ".gen")


def read_generation(store_path: Path) -> int:
    """The store's generation (0 before any write)."""
    try:
        fd = _open(store_path, os.O_RDONLY)
    except FileNotFoundError:
        return 0
    try:
        return int(os.pread(fd, 32, 0) or b"0")
    except ValueError:
        return 0
    finally:
        os.close(fd)


def bump_generation(store_path: Path) -> None:
    """Add one to the store's generation; called under the exclusive lock, before COMMIT."""
    fd = _open(store_path, os.O_RDWR | os.O_CREAT)
    try:
        current = os.pread(fd, 32, 0)
        value = int(current or b"0") + 1 if current.strip().isdigit() else 1
        os.pwrite(fd, f"{value:020d}".encode(), 0)  # one small write: never seen half-done
    finally:
        os.close(fd)


def _open(store_path: Path, flags: int) -> int:
    """The generation file, opened without following a symlink; a symlink or anything but a
    regular file raises StoreError naming it (FileNotFoundError passes, for a reader)."""
    path = generation_path(store_path)
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o666)
    except FileNotFoundError:
        raise
    except OSError as exc:
        kind = {errno.ELOOP: "a symlink", errno.EISDIR: "not a regular file"}.get(
            exc.errno or 0, f"not usable ({exc.strerror})"
        )
        raise StoreError(f"store file {path} is {kind}; remove it (tlxdb makes it anew)") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise StoreError(
            f"store file {path} is not a regular file; remove it (tlxdb makes it anew)"
        )
    return fd
