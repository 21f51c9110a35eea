from __future__ import annotations

import json

import pytest

from tlxstore.conformance import StoreConformance

pytest.importorskip("duckdb_extension_ducklake")
pytest.importorskip("duckdb_extension_sqlite_scanner")

from tlxstore.ducklake import DuckLakeStore, connect_lake  # noqa: E402


class TestDuckLakeStore(StoreConformance):
    def make_store(self, tmp_path):
        return DuckLakeStore(tmp_path / "catalog.sqlite")

    def rewrite_payload_key_order(self, store, event_id):
        store.close()
        con = connect_lake(store.path, write=True)
        (payload,) = con.execute(
            "SELECT payload FROM events WHERE event_id = ?", [event_id]
        ).fetchone()
        reordered = json.dumps(dict(reversed(list(json.loads(payload).items()))))
        con.execute("UPDATE events SET payload = ? WHERE event_id = ?", [reordered, event_id])
        con.close()
