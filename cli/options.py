"""Options and helpers every command shares: the --store option, opening the store, and help
texts that always say the default.

Nothing heavy is imported at module level: `tlxdb --help` imports every command module, so the
store, the optimizer, matplotlib and torch are imported inside the commands that use them
(benchmarks/cli_startup.py measures it; docs/CONTRACT.md has the figures).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from tlxstore.config import StoreRef
    from tlxstore.store import Store


def with_default(text: str, default: object) -> str:
    """A help text ending in its default, written as click writes one (`[default: X]`): for the
    options whose parsed default is None (meaning "not given"), so click would show none."""
    return f"{text}  [default: {default}]"


class BudgetOption(click.Option):
    """A budget flag (--max-rounds ...): None when not typed, so budget.json can tell; its help
    shows the TLX agent's default, read from tlxstore.events only when help is printed."""

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        from tlxstore.events import TLX_DEFAULT_THRESHOLDS

        record = super().get_help_record(ctx)
        if record is None:
            return None
        default = getattr(TLX_DEFAULT_THRESHOLDS, self.name or "")
        return record[0], with_default(record[1], default)


def _default_store(ctx: click.Context, param: click.Parameter, value: str | None) -> StoreRef:
    from tlxstore.config import settings, store_ref

    return settings().store if value is None else store_ref(value)


def store_option(f: Any) -> Any:
    """--store PATH|URL, resolved to $TLXDB_STORE or the per-user default when not given."""
    return click.option(
        "--store",
        "store",
        default=None,
        callback=_default_store,
        metavar="PATH|URL",
        help=with_default(
            "The evidence store: a DuckDB file, or a team store's URL "
            "(ducklake:postgres://USER@HOST/DB?data_path=DIR|s3://...; docs/STORE.md).",
            "$TLXDB_STORE, else ~/.local/share/tlxdb/store.duckdb",
        ),
    )(f)


def open_store(ref: StoreRef, create: bool) -> Store:
    """The store `ref` names, its stored views brought up to date (when it can be written);
    without create, a missing store is an error naming how to get one."""
    import queries
    from tlxstore.location import open_store as open_any_store

    if not create and isinstance(ref, Path) and not ref.exists():
        raise click.ClickException(
            f"no store at {ref}; pass --store, set TLXDB_STORE, or fill one with `tlxdb optimize` or `tlxdb import`"
        )
    store = open_any_store(ref, create=create)
    queries.persist_views(store)  # any DuckDB client opening the file sees the current views
    return store
