"""The store's generation: a counter in `<store>.gen` that every write bumps, so a process-local
replica (queries/replica.py) or a reader (Store._reading) can tell with one small read, and no
lock, that nothing changed since it last looked."""

from __future__ import annotations

import os
from pathlib import Path


def generation_path(store_path: Path) -> Path:
    return store_path.with_name(store_path.name + ".gen")


def read_generation(store_path: Path) -> int:
    """The store's generation (0 before any write)."""
    try:
        return int(generation_path(store_path).read_bytes() or b"0")
    except (FileNotFoundError, ValueError):
        return 0


def bump_generation(store_path: Path) -> None:
    """Add one to the store's generation; called under the exclusive lock, before COMMIT."""
    fd = os.open(generation_path(store_path), os.O_RDWR | os.O_CREAT, 0o666)
    try:
        current = os.pread(fd, 32, 0)
        value = int(current or b"0") + 1 if current.strip().isdigit() else 1
        os.pwrite(fd, f"{value:020d}".encode(), 0)  # one small write: never seen half-done
    finally:
        os.close(fd)
