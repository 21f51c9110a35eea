"""A process-local copy of the integer keys the per-candidate lookups filter on.

The optimizer asks the store, per candidate, "was this source measured?". Against a store of
millions of rows, attaching the file and scanning its key columns costs tens of milliseconds,
mostly cold metadata. This replica keeps, in an in-memory DuckDB, the keys of proj_decisions (row
id, measurement key, source and normalized hashes: 32 bytes a row) and refreshes them only when
the store's generation counter says something was written, reading just the rows appended since
(the table is append-only, so row ids only grow and never move; if they did, the key check
below notices and the replica is rebuilt). A lookup finds the row ids in memory; only when
there are some does it fetch those rows from the store, checks their keys against the replica
(a mismatch rebuilds it), and runs the lookup's SQL over them.
"""

from __future__ import annotations

import threading
import weakref

import duckdb
import pyarrow as pa

from queries import statement
from tlxstore.errors import StoreError
from tlxstore.store import Store, store_sql

_TABLES = {"proj_decisions": ("mk_key", "source_key", "norm_key")}


class KeyReplica:
    """The keys of the lookup tables of one store, kept current by its generation."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._mutex = threading.Lock()
        self._con = duckdb.connect()
        self._con.execute(store_sql("macros"))
        self._generation: int | None = None
        self._last_rid = dict.fromkeys(_TABLES, -1)
        for table, keys in _TABLES.items():
            cols = ", ".join(f"{k} BIGINT" for k in keys)
            self._con.execute(f"CREATE TABLE keys_{table} (rid BIGINT, {cols})")

    def _refresh(self) -> None:
        generation = self.store.generation()
        if generation == self._generation:
            return
        for table, keys in _TABLES.items():
            new = self.store.query(
                f"SELECT rowid AS rid, {', '.join(keys)} FROM {table} WHERE rowid > $after ORDER BY rowid",
                {"after": self._last_rid[table]},
            )
            if new.num_rows:
                self._con.register("new_keys", new)
                self._con.execute(f"INSERT INTO keys_{table} SELECT * FROM new_keys")
                self._con.unregister("new_keys")
                self._last_rid[table] = new.column("rid")[-1].as_py()
        self._generation = generation

    def _rebuild(self) -> None:
        for table in _TABLES:
            self._con.execute(f"DELETE FROM keys_{table}")
        self._last_rid = dict.fromkeys(_TABLES, -1)
        self._generation = None
        self._refresh()

    def lookup(self, table: str, key_filter: str, name: str, params: dict) -> pa.Table:
        """Run statements/<name>.sql over the rows of `table` whose keys pass `key_filter` (SQL
        over the key columns, with the same params)."""
        with self._mutex:
            for attempt in (1, 2):
                self._refresh()
                used = {k: v for k, v in params.items() if f"${k}" in key_filter}
                found = self._con.execute(
                    f"SELECT rid, {', '.join(_TABLES[table])} FROM keys_{table} WHERE {key_filter} ORDER BY rid",
                    used,
                ).to_arrow_table()
                if found.num_rows == 0:  # the common answer for a new source: no store access
                    return pa.table({})
                in_list = ", ".join(str(r) for r in found.column("rid").to_pylist())  # our own ints
                rows = self.store.query(
                    f"SELECT rowid AS rid, * FROM {table} WHERE rowid IN ({in_list}) ORDER BY rowid"
                )
                keys = ["rid", *_TABLES[table]]
                fetched = rows.select(keys)
                expected = found.select(keys)
                if fetched.equals(expected):
                    return _run_over(self._con, table, rows.drop_columns(["rid"]), name, params)
                if attempt == 1:
                    self._rebuild()  # row ids moved (a store rewritten under us): start over
            raise StoreError(
                f"store {self.store.path}: the decisions table does not match its own keys; "
                "export the runs and import them into a new store"
            )


def _run_over(
    con: duckdb.DuckDBPyConnection, table: str, rows: pa.Table, name: str, params: dict
) -> pa.Table:
    """The lookup's SQL over just these rows (registered under the table's name; the replica's
    own tables are named keys_*)."""
    con.register(table, rows)
    try:
        return con.execute(statement(name), params).to_arrow_table()
    finally:
        con.unregister(table)


_REPLICAS: weakref.WeakKeyDictionary[Store, KeyReplica] = weakref.WeakKeyDictionary()
_REPLICAS_MUTEX = threading.Lock()


def replica_of(store: Store) -> KeyReplica:
    """The replica of this Store object (made on first use)."""
    with _REPLICAS_MUTEX:
        replica = _REPLICAS.get(store)
        if replica is None:
            replica = _REPLICAS[store] = KeyReplica(store)
        return replica
