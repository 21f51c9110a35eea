"""The run lease: one process writes a run at a time.

A run's writer (`tlxdb optimize` from the moment its output folder exists, `--resume` before it
writes anything) holds an exclusive `flock` on `<output>/.lease` for the run's lifetime, with
its pid and host written in the file. A second writer is refused with RunBusyError naming them;
a killed holder's lease is free at once (the kernel drops the lock with the process).

The holder removes the file before it lets go, so a finished run leaves no lease behind. A
writer that locked a file since removed (it opened the path just before the holder removed it)
holds nothing: it takes the lease again on the file now at the path.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tlxstore.errors import RunBusyError, StoreError

LEASE_FILE = ".lease"


@contextmanager
def run_lease(out: Path, run_id: str) -> Iterator[None]:
    """Hold run `run_id`'s lease (in its output folder `out`) for the block."""
    path = out / LEASE_FILE
    fd = _lock(path, run_id)
    try:
        holder = json.dumps({"pid": os.getpid(), "host": socket.gethostname()})
        os.ftruncate(fd, 0)
        os.pwrite(fd, holder.encode(), 0)
        yield
    finally:
        path.unlink(missing_ok=True)  # still locked: no other writer holds this file
        os.close(fd)  # releases the lease


def _lock(path: Path, run_id: str) -> int:
    """A descriptor of the file at `path`, exclusively locked (RunBusyError when another
    process holds it)."""
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StoreError(
                f"cannot take the lease of run {run_id} ({path}): {exc.strerror}"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            raise RunBusyError(
                f"run {run_id} is being written by {_holder(path)}; wait for it to end, or stop "
                "it and then --resume"
            ) from None
        if _same_file(fd, path):
            return fd
        os.close(fd)  # a holder removed it as it let go: lock the file at the path now


def _same_file(fd: int, path: Path) -> bool:
    try:
        now = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (now.st_dev, now.st_ino)


def _holder(path: Path) -> str:
    try:
        held = json.loads(path.read_text())
        return f"pid {held['pid']} on host {held['host']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process (it has not written its pid yet)"
