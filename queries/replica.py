"""A process-local copy of the two tables the per-candidate lookups read.

The optimizer asks the store, per candidate, "was this source measured?" and, per prompt, "what
has every run under this identity learned?". Against a store of millions of rows, each visit
attaches the file into a cold buffer pool and reads compressed column segments: tens of
milliseconds. This replica keeps, in a compressed in-memory DuckDB, the columns of
proj_decisions and proj_exclusions the lookups read (statements/*.sql run over it unchanged),
and refreshes them only when the store's generation counter (`<store>.gen`, bumped under the
exclusive lock by every ingest that added rows) has moved, by reading just the rows appended
since, in one visit. A lookup with the generation unchanged reads one small file and never
touches the store.

The tables are append-only, so row ids only grow. Each refresh also reads each table's row
count and the keys of the last row the replica holds; if the table was rewritten under it (rows
moved or removed), those disagree and the replica is rebuilt from scratch.
"""

from __future__ import annotations

import hashlib
import threading
import weakref
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from queries import statement
from tlxstore.errors import StoreError
from tlxstore.store import Store

# table -> (columns the lookups read, the integer key columns checked on refresh)
_TABLES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "proj_decisions": (
        (
            "run_id",
            "candidate_id",
            "seq",
            "outcome",
            "reason",
            "speedup",
            "round",
            "proposed_at",
            "hypothesis",
            "knobs",
            "source_hash",
            "normalized_hash",
            "measurement_key",
            "source_key",
            "norm_key",
            "mk_key",
        ),
        ("mk_key", "source_key", "norm_key"),
    ),
    "proj_exclusions": (
        (
            "run_id",
            "candidate_id",
            "seq",
            "signature",
            "outcome",
            "reason",
            "hypothesis",
            "bundle_digest",
            "device_kind",
            "bundle_key",
        ),
        ("bundle_key",),
    ),
}


def tlx_key(text: str) -> int:
    """The store's integer key of a text, as sql/macros.sql computes it (60 bits of its md5)."""
    return int(hashlib.md5(text.encode()).hexdigest()[:15], 16)


# the parameters of each statement, for running it over no rows (to learn its result's types)
_NULL_PARAMS: dict[str, dict[str, Any]] = {
    "find_measured": {"measurement_key": "", "source_hash": "", "normalized_hash": ""},
    "measured_candidates": {"measurement_key": ""},
    "exclusions": {"bundle_digest": "", "device_kind": ""},
    "prior_best": {"measurement_key": "", "exclude_run": "", "limit": 0},
}


class KeyIndex:
    """Row positions by one integer key column: a sorted part (binary search) and a small
    unsorted tail of recent appends (scanned), merged into the sorted part when it grows."""

    MERGE_AT = 65_536

    def __init__(self) -> None:
        self._keys = np.empty(0, dtype=np.int64)
        self._pos = np.empty(0, dtype=np.int64)
        self._tail_keys = np.empty(0, dtype=np.int64)
        self._tail_start = 0  # the tail holds positions _tail_start.. in order

    def append(self, keys: np.ndarray, start: int) -> None:
        if len(self._tail_keys) == 0:
            self._tail_start = start
        self._tail_keys = np.concatenate([self._tail_keys, keys.astype(np.int64, copy=False)])
        if len(self._tail_keys) >= self.MERGE_AT:
            all_keys = np.concatenate([self._keys, self._tail_keys])
            all_pos = np.concatenate(
                [self._pos, np.arange(self._tail_start, self._tail_start + len(self._tail_keys))]
            )
            order = np.argsort(all_keys, kind="stable")
            self._keys, self._pos = all_keys[order], all_pos[order]
            self._tail_keys = np.empty(0, dtype=np.int64)

    def find(self, key: int) -> np.ndarray:
        lo = int(np.searchsorted(self._keys, key, side="left"))
        hi = int(np.searchsorted(self._keys, key, side="right"))
        hits = self._pos[lo:hi]
        tail = np.flatnonzero(self._tail_keys == key) + self._tail_start
        return np.concatenate([hits, tail]) if len(tail) else hits


class RowStore:
    """The rows of one table by position: one contiguous part (a take from it costs only the
    rows taken) and a small tail of recent appends, merged into the part when it grows."""

    MERGE_AT = 65_536

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self._main = schema.empty_table()
        self._tail: list[pa.RecordBatch] = []
        self._tail_rows = 0
        self._tail_table: pa.Table | None = None

    def append(self, rows: pa.Table) -> None:
        self._tail.extend(rows.to_batches())
        self._tail_rows += rows.num_rows
        self._tail_table = None
        if self._tail_rows >= self.MERGE_AT:
            self._main = pa.concat_tables([self._main, self._tail_part()]).combine_chunks()
            self._tail, self._tail_rows, self._tail_table = [], 0, None

    def _tail_part(self) -> pa.Table:
        if self._tail_table is None:
            self._tail_table = pa.Table.from_batches(self._tail, self.schema).combine_chunks()
        return self._tail_table

    def take(self, positions: np.ndarray) -> pa.Table:
        """The rows at these positions, in position order."""
        positions = np.sort(positions)
        split = int(np.searchsorted(positions, self._main.num_rows))
        parts = [self._main.take(pa.array(positions[:split], type=pa.int64()))]
        if split < len(positions):
            rest = positions[split:] - self._main.num_rows
            parts.append(self._tail_part().take(pa.array(rest, type=pa.int64())))
        return pa.concat_tables(parts) if len(parts) > 1 else parts[0]

    @property
    def nbytes(self) -> int:
        return self._main.nbytes + sum(b.nbytes for b in self._tail)


class TableReplica:
    """The lookup tables of one store, kept current by its generation."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._mutex = threading.Lock()
        # runs the statements over a few thousand rows at most: one thread has no start-up cost
        self._con = duckdb.connect(config={"threads": 1})
        self._generation: int | None = None
        self._empty_results: dict[str, pa.Table] = {}
        self._reset()

    def _reset(self) -> None:
        self._store_rows: dict[str, RowStore | None] = dict.fromkeys(_TABLES)
        self._rows = dict.fromkeys(_TABLES, 0)  # rows held = the next row id expected
        self._last_keys: dict[str, tuple[Any, ...] | None] = dict.fromkeys(_TABLES)
        self._index = {t: {k: KeyIndex() for k in keys} for t, (_, keys) in _TABLES.items()}
        self._generation = None

    def _refresh(self, rebuild: bool = True) -> None:
        generation = self.store.generation()
        if generation == self._generation:
            return
        statements: list[tuple[str, dict[str, Any] | None]] = []
        for table, (cols, keys) in _TABLES.items():
            after = {"after": self._rows[table] - 1}
            statements.append(
                (
                    f"SELECT rowid AS rid, {', '.join(cols)} FROM {table} "
                    "WHERE rowid > $after ORDER BY rowid",
                    after,
                )
            )
            statements.append(
                (
                    f"SELECT (SELECT count(*) FROM {table}) AS n, "
                    f"(SELECT [{', '.join(keys)}] FROM {table} WHERE rowid = $after) AS last_keys",
                    after,
                )
            )
        fetched = self.store.query_many(statements)
        news = {table: fetched[2 * i] for i, table in enumerate(_TABLES)}
        checks = {table: fetched[2 * i + 1].to_pylist()[0] for i, table in enumerate(_TABLES)}
        if not all(self._continues(t, news[t], checks[t]) for t in _TABLES):
            if rebuild:
                self._rebuild()
            return
        for table, (_cols, keys) in _TABLES.items():
            self._append(table, news[table].drop_columns(["rid"]), keys)
        self._generation = generation

    def _continues(self, table: str, new: pa.Table, check: dict[str, Any]) -> bool:
        """Whether the store's table is the replica's rows plus `new`, appended after them."""
        held, n = self._rows[table], new.num_rows
        if check["n"] != held + n:
            return False
        rid = new.column("rid")
        if n and (rid[0].as_py(), rid[-1].as_py()) != (held, held + n - 1):
            return False
        last = check["last_keys"]
        return not held or (last is not None and tuple(last) == self._last_keys[table])

    def _append(self, table: str, rows: pa.Table, keys: tuple[str, ...]) -> None:
        held = self._store_rows[table]
        if held is None:  # the store's column types, known even from a fetch of no rows
            held = self._store_rows[table] = RowStore(rows.schema)
        if rows.num_rows == 0:
            return
        start = self._rows[table]
        for key in keys:
            column = rows.column(key).fill_null(-1).to_numpy()
            self._index[table][key].append(column, start)
        held.append(rows)
        self._rows[table] += rows.num_rows
        tail = rows.slice(rows.num_rows - 1).select(list(keys)).to_pylist()[0]
        self._last_keys[table] = tuple(tail[k] for k in keys)

    def _rebuild(self) -> None:
        self._reset()
        self._refresh(rebuild=False)
        if self._generation is None:
            raise StoreError(
                f"store {self.store.path}: the lookup tables change under their own row ids; "
                "export the runs and import them into a new store"
            )

    def _rows_at(self, table: str, positions: np.ndarray) -> pa.Table:
        held = self._store_rows[table]
        assert held is not None  # made by the first refresh
        return held.take(positions)

    def nbytes(self) -> int:
        """The memory the replica's rows take (Arrow buffers; the indexes add 16 bytes a key)."""
        return sum(r.nbytes for r in self._store_rows.values() if r is not None)

    def _empty_result(self, name: str, table: str) -> pa.Table:
        """The statement's result over no rows (its column names and types), cached."""
        cached = self._empty_results.get(name)
        if cached is None:
            self._con.register(table, self._rows_at(table, np.empty(0, np.int64)))
            try:
                cached = self._con.execute(statement(name), _NULL_PARAMS[name]).to_arrow_table()
            finally:
                self._con.unregister(table)
            self._empty_results[name] = cached
        return cached

    def run(
        self, statements: list[tuple[str, dict[str, Any], str, dict[str, list[str]]]]
    ) -> list[pa.Table]:
        """Each (statement name, params, table, {key column: [texts]}): statements/<name>.sql
        over the rows of `table` whose key column holds the key of one of the texts (the SQL
        filters the rows exactly), all at the store's current generation."""
        with self._mutex:
            self._refresh()
            out = []
            for name, params, table, keyed in statements:
                found = [
                    self._index[table][column].find(tlx_key(text))
                    for column, texts in keyed.items()
                    for text in texts
                ]
                positions = np.unique(np.concatenate(found)) if found else np.empty(0, np.int64)
                if len(positions) == 0:  # every statement filters its rows (aggregates are
                    # grouped): no rows in, no rows out (tests/queries checks each statement)
                    out.append(self._empty_result(name, table))
                    continue
                self._con.register(table, self._rows_at(table, positions))
                try:
                    out.append(self._con.execute(statement(name), params).to_arrow_table())
                finally:
                    self._con.unregister(table)
            return out


_REPLICAS: weakref.WeakKeyDictionary[Store, TableReplica] = weakref.WeakKeyDictionary()
_REPLICAS_MUTEX = threading.Lock()


def replica_of(store: Store) -> TableReplica:
    """The replica of this Store object (made on first use)."""
    with _REPLICAS_MUTEX:
        replica = _REPLICAS.get(store)
        if replica is None:
            replica = _REPLICAS[store] = TableReplica(store)
        return replica
