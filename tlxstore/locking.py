"""The store's inter-process lock: `<store>.lock`, taken shared by readers and exclusive by writers.

DuckDB lets one process hold a database file read-write, or many hold it read-only, never both.
Every Store call therefore opens DuckDB only while it holds this lock (flock, so a killed holder
releases it at once), in the mode the lock allows, and closes it before releasing. Waiting polls
with a growing back-off up to the configured timeout, then raises StoreBusyError.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tlxstore.errors import StoreBusyError, StoreError

POLL_START_S = 0.001
POLL_MAX_S = 0.05


def lock_path(store_path: Path) -> Path:
    return store_path.with_name(store_path.name + ".lock")


@contextmanager
def store_lock(store_path: Path, exclusive: bool, timeout_s: float) -> Iterator[None]:
    """Hold the store's lock (exclusive for writers, shared for readers) for the block."""
    path = lock_path(store_path)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o666)
    except OSError as exc:
        if (
            not exclusive
            and exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS)
            and store_path.exists()
        ):
            yield  # a read-only folder has no writers to keep out
            return
        _raise_open_error(store_path, path, exc)
    try:
        mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        deadline = time.monotonic() + timeout_s
        delay = POLL_START_S
        while True:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise StoreError(
                        f"cannot lock the store {store_path}: {exc.strerror}"
                    ) from None
            if time.monotonic() >= deadline:
                raise StoreBusyError(
                    f"store {store_path} stayed locked by other tlxdb processes for {timeout_s:g} s; "
                    "retry, or raise TLXDB_LOCK_TIMEOUT_S"
                )
            time.sleep(delay)
            delay = min(delay * 2, POLL_MAX_S)
        yield
    finally:
        os.close(fd)  # releases the lock


def _raise_open_error(store_path: Path, path: Path, exc: OSError) -> None:
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        raise StoreError(
            f"store {store_path} is not writable (cannot create {path.name})"
        ) from None
    if exc.errno == errno.ENOENT:
        raise StoreError(f"store folder {store_path.parent} does not exist") from None
    raise StoreError(f"cannot open the store lock {path}: {exc.strerror}") from None
