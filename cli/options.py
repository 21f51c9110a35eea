"""Options and helpers every command shares: the --store option and opening the store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

import queries
from tlxstore.config import settings
from tlxstore.store import Store


def _default_store(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path:
    return value if value is not None else settings().store


def store_option(f: Any) -> Any:
    """--store PATH, resolved to $TLXDB_STORE or the per-user default when not given."""
    return click.option(
        "--store",
        "store",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        callback=_default_store,
        help="The evidence store (default: $TLXDB_STORE, else a per-user data folder).",
    )(f)


def open_store(path: Path, create: bool) -> Store:
    """The store at path, its stored views brought up to date (when it can be written);
    without create, a missing store is an error naming how to get one."""
    if not create and not path.exists():
        raise click.ClickException(
            f"no store at {path}; pass --store, set TLXDB_STORE, or fill one with `tlxdb optimize` or `tlxdb import`"
        )
    store = Store(path, create=create)
    queries.persist_views(store)  # any DuckDB client opening the file sees the current views
    return store
