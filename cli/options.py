"""Options and helpers every command shares: the --store option and opening the store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

import queries
from tlxstore.config import StoreRef, settings, store_ref
from tlxstore.location import open_store as open_any_store
from tlxstore.store import Store


def _default_store(ctx: click.Context, param: click.Parameter, value: str | None) -> StoreRef:
    return settings().store if value is None else store_ref(value)


def store_option(f: Any) -> Any:
    """--store PATH|URL, resolved to $TLXDB_STORE or the per-user default when not given."""
    return click.option(
        "--store",
        "store",
        default=None,
        callback=_default_store,
        metavar="PATH|URL",
        help="The evidence store: a DuckDB file, or a team store's URL "
        "(ducklake:postgres://USER@HOST/DB?data_path=DIR|s3://...; docs/STORE.md). "
        "Default: $TLXDB_STORE, else a per-user data folder.",
    )(f)


def open_store(ref: StoreRef, create: bool) -> Store:
    """The store `ref` names, its stored views brought up to date (when it can be written);
    without create, a missing store is an error naming how to get one."""
    if not create and isinstance(ref, Path) and not ref.exists():
        raise click.ClickException(
            f"no store at {ref}; pass --store, set TLXDB_STORE, or fill one with `tlxdb optimize` or `tlxdb import`"
        )
    store = open_any_store(ref, create=create)
    queries.persist_views(store)  # any DuckDB client opening the file sees the current views
    return store
