from __future__ import annotations

import json

import pytest

from tlxstore.conformance import StoreConformance
from tlxstore.testing import envelopes, leave_behind, small_run

pytest.importorskip("duckdb_extension_ducklake")
pytest.importorskip("duckdb_extension_sqlite_scanner")

from tlxstore.ducklake import DuckLakeStore, connect_lake  # noqa: E402

# DuckLake keeps a commit's rows of a table in the catalog when they are few (data inlining, at
# most 10 rows), in a Parquet file otherwise: loop-sized ingests leave every projection's rows in
# the catalog, one batch of many candidates writes these to files.
FILED = ("proj_candidates", "proj_decisions", "proj_samples", "proj_sources")


def _file_counts(store: DuckLakeStore) -> dict[str, int]:
    store.close()
    con = connect_lake(store.path)
    try:
        rows = con.execute("SELECT table_name, file_count FROM ducklake_table_info('tlxstore')")
        return {name: count for name, count in rows.fetchall() if name.startswith("proj_")}
    finally:
        con.close()


class TestDuckLakeStore(StoreConformance):
    # Each ingest is a DuckLake commit (~0.4 s on two cores); 125 events a batch keeps the
    # loop-sized feeding short. Rows inlined in the catalog are the test below's, with
    # loop-sized batches.
    small_batch = 125

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

    def leave_behind(self, store):
        store.close()
        con = connect_lake(store.path, write=True)
        try:
            return leave_behind(con)
        finally:
            con.close()

    def test_projection_rows_inlined_in_the_catalog_read_back_as_rows_in_parquet_files(
        self, tmp_path
    ):
        run = envelopes("r1", small_run(12, tag="i"))
        (tmp_path / "inlined").mkdir()
        (tmp_path / "filed").mkdir()
        inlined = self.make_store(tmp_path / "inlined")
        for i in range(0, len(run), 11):  # loop-sized: each projected in its own ingest
            inlined.ingest(run[i : i + 11])
            assert inlined.projection_lag() == 0
        filed = self.make_store(tmp_path / "filed")
        assert filed.ingest(run) == len(run) and filed.projection_lag() == 0
        assert self.projections(inlined) == self.projections(filed)
        assert all(self.projections(inlined)[t] for t in FILED)
        assert not any(_file_counts(inlined).values())
        counts = _file_counts(filed)
        assert all(counts[t] for t in FILED), counts
