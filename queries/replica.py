"""A process-local copy of the two tables the per-candidate lookups read.

The optimizer asks the store, per candidate, "was this source measured?" and, per prompt, "what
has every run under this identity learned?". Against a store of millions of rows, each visit
attaches the file into a cold buffer pool and reads compressed column segments: tens of
milliseconds. This replica keeps in memory the columns of proj_decisions and proj_exclusions
the lookups read (Arrow rows, a numpy index per integer key column), and refreshes them only when
the store's generation counter (`<store>.gen`, bumped under the exclusive lock by every ingest
that added rows) has moved, by reading just the rows appended since (through Store.query, which
first runs the projection pass if large ingests left events behind). A lookup with the
generation unchanged reads one small file and never touches the store: it finds the positions
of its keys, takes those rows and runs its statement (statements/*.sql) over just them.

A refresh first reads each table's row count and the keys of the last row the replica holds (one
small statement); only a table that grew is then read, from the row after the last one held.
The tables are append-only, so row ids only grow; if a table was rewritten under the replica
(rows moved or removed), the count or those keys disagree and the replica is rebuilt.
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
            "ci_low",
            "ci_high",
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
            "measured",
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
        # first visit: each table's row count and the keys of the last row the replica holds
        parts, params = [], {}
        for i, (table, (_cols, keys)) in enumerate(_TABLES.items()):
            params[f"last{i}"] = self._rows[table] - 1
            parts.append(f"(SELECT count(*) FROM {table}) AS n{i}")
            parts.append(
                f"(SELECT [{', '.join(keys)}] FROM {table} WHERE rowid = $last{i}) AS keys{i}"
            )
        check = self.store.query("SELECT " + ", ".join(parts), params).to_pylist()[0]
        grown = []
        for i, table in enumerate(_TABLES):
            held, n, last = self._rows[table], check[f"n{i}"], check[f"keys{i}"]
            if n < held or (held and (last is None or tuple(last) != self._last_keys[table])):
                self._rewritten(rebuild)  # not the replica's rows plus appended ones
                return
            if n > held or self._store_rows[table] is None:
                grown.append(table)
        # second visit, only when a table has new rows: the rows after the last one held
        fetched = (
            self.store.query_many(
                [
                    (
                        f"SELECT rowid AS rid, {', '.join(_TABLES[table][0])} FROM {table} "
                        "WHERE rowid > $after ORDER BY rowid",
                        {"after": self._rows[table] - 1},
                    )
                    for table in grown
                ]
            )
            if grown
            else []
        )
        for table, new in zip(grown, fetched, strict=True):
            rid, held, k = new.column("rid"), self._rows[table], new.num_rows
            if k and (rid[0].as_py(), rid[-1].as_py()) != (held, held + k - 1):
                self._rewritten(rebuild)
                return
        for table, new in zip(grown, fetched, strict=True):
            self._append(table, new.drop_columns(["rid"]), _TABLES[table][1])
        self._generation = generation

    def _rewritten(self, rebuild: bool) -> None:
        if rebuild:
            self._rebuild()

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
                f"store {self.store.location}: the lookup tables change under their own row ids; "
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
