from __future__ import annotations

from store_conformance import StoreConformance

from tlxstore.store import Store


class TestDuckDBFileStore(StoreConformance):
    def make_store(self, tmp_path):
        return Store(tmp_path / "store.duckdb")
