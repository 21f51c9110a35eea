from __future__ import annotations

import json

import duckdb

from tlxstore.conformance import StoreConformance
from tlxstore.store import Store
from tlxstore.testing import leave_behind


class TestDuckDBFileStore(StoreConformance):
    def make_store(self, tmp_path):
        return Store(tmp_path / "store.duckdb")

    def rewrite_payload_key_order(self, store, event_id):
        con = duckdb.connect(str(store.path))
        (payload,) = con.execute(
            "SELECT payload FROM events WHERE event_id = ?", [event_id]
        ).fetchone()
        reordered = json.dumps(dict(reversed(list(json.loads(payload).items()))))
        assert reordered != payload
        con.execute("UPDATE events SET payload = ? WHERE event_id = ?", [reordered, event_id])
        con.close()

    def leave_behind(self, store):
        store.close()
        return leave_behind(store.path)
