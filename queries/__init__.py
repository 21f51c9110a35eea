"""The store's views and lookups as SQL files, loaded by name, and the Python that runs them.

`views/<name>.sql` is a view (a SELECT over the store's tables); `statements/<name>.sql` is a
parameterized lookup the loop makes (see lookups.py). A query sees exactly the views it names,
defined as temporary views on its read-only connection.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources
from typing import Any

import pyarrow as pa

from tlxstore.store import Store


def _folder(kind: str):  # noqa: ANN202 - an importlib Traversable
    return resources.files("queries").joinpath(kind)


@cache
def names() -> tuple[str, ...]:
    """The view names, sorted."""
    return tuple(sorted(p.name[:-4] for p in _folder("views").iterdir() if p.name.endswith(".sql")))


@cache
def view_sql(name: str) -> str:
    """The SELECT of one view; KeyError for an unknown name."""
    if name not in names():
        raise KeyError(f"no view {name!r}; views: {', '.join(names())}")
    return _folder("views").joinpath(f"{name}.sql").read_text()


@cache
def statement(name: str) -> str:
    """A lookup statement from statements/<name>.sql."""
    return _folder("statements").joinpath(f"{name}.sql").read_text()


def views_for(sql: str) -> dict[str, str]:
    """The views `sql` names (and those they name), in an order that defines each before use."""
    out: dict[str, str] = {}

    def visit(text: str, stack: tuple[str, ...]) -> None:
        words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))
        for name in names():
            if name in words and name not in out and name not in stack:
                body = view_sql(name)
                visit(body, (*stack, name))
                out[name] = body

    visit(sql, ())
    return out


def query(
    store: Store, sql: str, params: Mapping[str, Any] | Sequence[Any] | None = None
) -> pa.Table:
    """Run one read-only SELECT over the store's views."""
    return store.query(sql, params, views=views_for(sql))


def view(store: Store, name: str) -> pa.Table:
    """Every row of one view."""
    view_sql(name)
    return query(store, f'SELECT * FROM "{name}"')
