"""Views stored in the store file, so that any DuckDB client (the duckdb CLI, a notebook) that
opens it sees them. tlxdb's own queries define the views they name as temporary views on every
call (queries/__init__.py), so they never depend on what the file holds; the stored copies are
for everybody else, and are replaced whenever their definitions change (`tlxdb_meta.views_digest`
names the set the file holds)."""

from __future__ import annotations

from collections.abc import Sequence

import duckdb

from tlxstore.store.sql import ALIAS

DIGEST_KEY = "views_digest"


def stored_digest(con: duckdb.DuckDBPyConnection) -> str | None:
    row = con.execute("SELECT value FROM tlxdb_meta WHERE key = ?", [DIGEST_KEY]).fetchone()
    return row[0] if row else None


def replace_all(
    con: duckdb.DuckDBPyConnection, views: Sequence[tuple[str, str]], digest: str
) -> None:
    """In one transaction: drop every view the file holds, create `views` in the order given
    (each after those it reads) and record their digest."""
    con.execute("BEGIN")
    try:
        held = con.execute(
            "SELECT view_name FROM duckdb_views() WHERE database_name = ? AND NOT internal "
            "AND NOT temporary",
            [ALIAS],
        ).fetchall()
        for (name,) in held:
            con.execute(f'DROP VIEW IF EXISTS {ALIAS}.main."{name}"')
        for name, body in views:
            con.execute(f'CREATE VIEW {ALIAS}.main."{name}" AS {body}')
        con.execute("DELETE FROM tlxdb_meta WHERE key = ?", [DIGEST_KEY])
        con.execute("INSERT INTO tlxdb_meta VALUES (?, ?)", [DIGEST_KEY, digest])
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
