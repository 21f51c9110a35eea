"""The views are stored in the store file: a plain DuckDB client opening it sees them, and they
are replaced when their definitions change (tlxdb_meta.views_digest)."""

from __future__ import annotations

import duckdb

import queries
from tlxstore.store import Store
from tlxstore.store.views import DIGEST_KEY
from tlxstore.testing import ingest_run, small_run


def _file_views(path) -> set[str]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return {
            r[0]
            for r in con.execute(
                "SELECT view_name FROM duckdb_views() WHERE NOT internal"
            ).fetchall()
        }
    finally:
        con.close()


def test_a_plain_duckdb_client_sees_every_view_with_its_rows(store_path):
    store = Store(store_path)
    ingest_run(store, "r1", small_run(2))
    assert queries.persist_views(store) is True
    assert queries.persist_views(store) is False  # already current: nothing written
    store.close()
    assert _file_views(store_path) == set(queries.names())
    con = duckdb.connect(str(store_path), read_only=True)
    row = con.execute(
        "SELECT status, winner_id, candidates FROM runs WHERE run_id = 'r1'"
    ).fetchone()
    con.close()
    assert row == ("finished", "c002", 2)


def test_views_of_another_definition_are_replaced_on_open(store_path, monkeypatch):
    store = Store(store_path)
    queries.persist_views(store)
    with store._connect(
        write=True
    ) as con:  # as an older tlxdb left it: another set, one stale view
        con.execute("CREATE OR REPLACE VIEW runs AS SELECT 1 AS stale")
        con.execute("CREATE VIEW gone AS SELECT 2 AS x")
        con.execute(f"UPDATE tlxdb_meta SET value = 'old' WHERE key = '{DIGEST_KEY}'")
    store.close()
    from cli.options import open_store

    open_store(store_path, create=False).close()  # every command opens the store this way
    assert _file_views(store_path) == set(queries.names())
    con = duckdb.connect(str(store_path), read_only=True)
    assert "status" in [d[0] for d in con.execute("SELECT * FROM runs").description]
    con.close()
