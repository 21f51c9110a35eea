"""Opening a store by the reference a user gives (`--store`, `$TLXDB_STORE`): a path is a DuckDB
file (tlxstore/store), a `ducklake:postgres://...` URL a team store (tlxstore/team.py)."""

from __future__ import annotations

import os
from pathlib import Path

from tlxstore.config import TEAM_STORE_PREFIXES, data_dir
from tlxstore.errors import StoreError
from tlxstore.store import Store


def is_team_url(ref: str | os.PathLike[str]) -> bool:
    return isinstance(ref, str) and ref.startswith(TEAM_STORE_PREFIXES)


def open_store(
    ref: str | os.PathLike[str], *, create: bool = True, lock_timeout_s: float | None = None
) -> Store:
    """The store `ref` names; without create, a store that does not exist is a StoreError."""
    if is_team_url(ref):
        from tlxstore.team import TeamStore  # psycopg and the extensions only for a team store

        return TeamStore(str(ref), create=create, lock_timeout_s=lock_timeout_s)
    if isinstance(ref, str) and ref.startswith("ducklake:"):
        raise StoreError(
            f"store {ref!r}: a DuckLake store URL starts with {' or '.join(TEAM_STORE_PREFIXES)}"
        )
    path = Path(ref)
    if create and path.parent == data_dir():  # the per-user default: a fresh machine lacks it
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    return Store(path, create=create, lock_timeout_s=lock_timeout_s)
