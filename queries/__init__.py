"""The store's views and lookups as SQL files, loaded by name, and the Python that runs them.

`views/<name>.sql` is a view (a SELECT over the store's tables); `statements/<name>.sql` is a
parameterized lookup the loop makes (see lookups.py). A query sees exactly the views it names,
defined as temporary views on its read-only connection.

A view may name parameters (`$name`, each cast to its type): as a view, and as the store file
holds it, each is NULL, which the view reads as "no restriction"; `bound_report` runs a report
over the view with them bound, so a lookup that wants one run's rows restricts the view's own
joins rather than filtering what it computed for every run.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Mapping, Sequence
from functools import cache, cached_property, lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from tlxstore.errors import ConfigError
from tlxstore.store import Store
from tlxstore.store.connection import Sandbox


def _folder(kind: str):  # noqa: ANN202 - an importlib Traversable
    return resources.files("queries").joinpath(kind)


@cache
def names() -> tuple[str, ...]:
    """The view names, sorted."""
    return tuple(sorted(p.name[:-4] for p in _folder("views").iterdir() if p.name.endswith(".sql")))


_PARAMETER = re.compile(r"\$[A-Za-z_]\w*")


@cache
def _view_text(name: str) -> str:
    """One view's file: its SELECT with the parameters it names; KeyError for an unknown name."""
    if name not in names():
        raise KeyError(f"no view {name!r}; views: {', '.join(names())}")
    return _folder("views").joinpath(f"{name}.sql").read_text()


@cache
def view_sql(name: str) -> str:
    """The SELECT of one view, each parameter it names NULL; KeyError for an unknown name."""
    return _PARAMETER.sub("NULL", _view_text(name))


@cache
def report_sql(name: str) -> str:
    """A report query from reports/<name>.sql: one SELECT over one view, with named parameters."""
    return _folder("reports").joinpath(f"{name}.sql").read_text()


def report(
    store: Store, names: Sequence[str], params: Mapping[str, Any]
) -> dict[str, list[dict[str, Any]]]:
    """Run report queries (reports/<name>.sql) in one visit to the store; name -> rows. Each
    query is given the parameters it names."""
    texts = [report_sql(n) for n in names]
    views = views_for("\n".join(texts))
    statements = [(t, {k: v for k, v in params.items() if f"${k}" in t}) for t in texts]
    tables = store.query_many(statements, views=views)
    return {n: t.to_pylist() for n, t in zip(names, tables, strict=True)}


def bound_report(
    store: Store, name: str, view: str, params: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """Run report query `name` (reports/<name>.sql, one SELECT without a WITH of its own) over
    `view` with the view's parameters bound from `params` as the report's are: the view's SELECT
    is a CTE of the query under the view's name, where the view would read each as NULL."""
    text = report_sql(name)
    sql = f'WITH "{view}" AS (\n{_view_text(view)}\n)\n{text}'
    views = {n: body for n, body in views_for(sql).items() if n != view}
    used = {k: v for k, v in params.items() if f"${k}" in sql}
    (table,) = store.query_many([(sql, used)], views=views)
    return table.to_pylist()


@cache
def statement(name: str) -> str:
    """A lookup statement from statements/<name>.sql."""
    return _folder("statements").joinpath(f"{name}.sql").read_text()


def views_for(sql: str) -> dict[str, str]:
    """The views `sql` reads (and those they read), in an order that defines each before use."""
    return _in_order(tables_read(sql))


def _in_order(wanted: frozenset[str] | Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}

    def visit(name: str, stack: tuple[str, ...]) -> None:
        if name in out or name in stack:
            return
        body = view_sql(name)
        for inner in sorted(tables_read(body) & set(names())):
            visit(inner, (*stack, name))
        out[name] = body

    for name in sorted(set(wanted) & set(names())):
        visit(name, ())
    return out


_PARSER_LOCK = threading.Lock()  # one connection is used by one thread at a time


@cache
def _parser() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB for its parser, made on first use. One thread: a parse needs no pool,
    and starting one doubled the connection's cost (22 -> 9.5 ms wall on the 2-core VM), paid by
    every command that runs a query."""
    return duckdb.connect(config={"threads": 1})


@lru_cache(maxsize=512)  # the views' bodies, and the queries a process makes
def tables_read(sql: str) -> frozenset[str]:
    """The names `sql` reads as tables (views, tables, CTEs), as DuckDB's parser finds them: a
    column or an alias named like a view, a comment or a string is none. A text the parser does
    not take as one SELECT (an EXPLAIN, a syntax error: the query reports its own error later)
    falls back to every word outside comments."""
    with _PARSER_LOCK:
        row = _parser().execute("SELECT json_serialize_sql(?)", [sql]).fetchone()
    tree = json.loads(row[0]) if row else {"error": True}
    if tree.get("error"):
        return frozenset(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", re.sub(r"--[^\n]*", "", sql)))
    found: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if node.get("type") == "BASE_TABLE" and isinstance(node.get("table_name"), str):
                found.add(node["table_name"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(tree)
    return frozenset(found)


def query(
    store: Store,
    sql: str,
    params: Mapping[str, Any] | Sequence[Any] | None = None,
    *,
    sandbox: Sandbox | None = None,
) -> pa.Table:
    """Run one read-only SELECT over the store's views (SQL a user typed: in a `sandbox`)."""
    return store.query(sql, params, views=views_for(sql), sandbox=sandbox)


def view(store: Store, name: str) -> pa.Table:
    """Every row of one view."""
    view_sql(name)
    return query(store, f'SELECT * FROM "{name}"')


def all_views() -> dict[str, str]:
    """Every view, each after those it reads."""
    return _in_order(names())


class _InOrder(Sequence[tuple[str, str]]):
    """Every view (name, SELECT) after those it reads, ordered when first read: ordering parses
    every view, which persist_views needs only when the store's views are not current (every
    command opens the store through it, so `tlxdb runs` starts without that parse)."""

    @cached_property
    def _items(self) -> list[tuple[str, str]]:
        return list(all_views().items())

    def __getitem__(self, i: Any) -> Any:
        return self._items[i]

    def __len__(self) -> int:
        return len(self._items)


def persist_views(store: Store) -> bool:
    """Store every view in the store file (so any DuckDB client sees them), replacing the set it
    holds when the definitions changed; returns whether it wrote them."""
    files = [[name, view_sql(name)] for name in names()]
    digest = hashlib.sha256(json.dumps(files).encode()).hexdigest()
    return store.define_views(_InOrder(), digest)


def nest_json(table: pa.Table) -> pa.Table:
    """`table` with each column DuckDB typed JSON (text) parsed into nested Arrow values (structs,
    lists, numbers), so Parquet and JSON output keep the structure. A column whose values have no
    common Arrow type (a key holding a number in one row and text in another) stays JSON text."""
    for i, f in enumerate(table.schema):
        if (f.metadata or {}).get(b"duckdb.type") != b"JSON":
            continue
        values = [None if v is None else json.loads(v) for v in table.column(i).to_pylist()]
        try:
            nested = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            continue
        table = table.set_column(i, pa.field(f.name, nested.type, metadata=f.metadata), nested)
    return table


def export_view(store: Store, name: str, to: Path) -> int:
    """Write every row of one view to a Parquet file (typed columns, JSON columns as nested
    structs), atomically: a temporary file created exclusively beside it, renamed into place
    (tlxstore.export.write_new_file). Returns the row count."""
    try:
        view_sql(name)
    except KeyError as exc:
        raise ConfigError(str(exc.args[0])) from None
    # here, not at import: every command imports this module, and tlxstore.export the codec
    import pyarrow.parquet as pq

    from tlxstore.export import new_destination, write_new_file

    if not new_destination(to, "Parquet file"):
        raise ConfigError(f"{to} exists; give a new file")

    table = nest_json(view(store, name))
    write_new_file(to, lambda f: pq.write_table(table, f), "Parquet file")
    return table.num_rows
