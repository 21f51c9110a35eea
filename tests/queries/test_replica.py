"""The process-local replica the lookups read: current by the store's generation, never a
store visit when nothing was written, keys and statements that agree with the store's."""

from __future__ import annotations

import random

import duckdb
import numpy as np
import pytest

from queries import lookups, statement
from queries.replica import _NULL_PARAMS, KeyIndex, replica_of, tlx_key
from tlxstore.errors import StoreBusyError
from tlxstore.locking import store_lock
from tlxstore.store import Store
from tlxstore.testing import MEASUREMENT_KEY, ingest_run, small_run

_ingest = ingest_run


def test_lookups_with_nothing_written_since_never_visit_the_store(store_path):
    """While another holder keeps the store locked, lookups at an unchanged generation answer
    from the replica; a plain store query waits and times out."""
    store = Store(store_path, lock_timeout_s=0.3)
    _ingest(store, "r1", small_run(2))
    before = lookups.prompt_context(store, MEASUREMENT_KEY, "sha256:bundle", "cpu-interpreter", "x")
    with store_lock(store.path, exclusive=True, timeout_s=1.0):
        assert (
            lookups.prompt_context(store, MEASUREMENT_KEY, "sha256:bundle", "cpu-interpreter", "x")
            == before
        )
        assert lookups.find_measured(store, MEASUREMENT_KEY, "sha256:a", "sha256:b") is None
        with pytest.raises(StoreBusyError):
            store.query("SELECT 1")
    _ingest(Store(store_path), "r2", small_run(1, tag="later"))
    after = lookups.measured_candidates(store, MEASUREMENT_KEY)
    assert ("r2", "c001") in {(m.run_id, m.candidate_id) for m in after}


def test_the_replica_key_is_the_store_key(store_path):
    store = Store(store_path)
    _ingest(store, "r1", small_run(3))
    rows = store.query(
        "SELECT source_hash, source_key, normalized_hash, norm_key, measurement_key, mk_key "
        "FROM proj_decisions WHERE source_hash IS NOT NULL"
    ).to_pylist()
    assert rows
    for r in rows:
        assert tlx_key(r["source_hash"]) == r["source_key"]
        assert tlx_key(r["normalized_hash"]) == r["norm_key"]
        assert tlx_key(r["measurement_key"]) == r["mk_key"]


@pytest.mark.parametrize("name", sorted(_NULL_PARAMS))
def test_each_lookup_statement_gives_no_rows_over_no_rows(store_path, name):
    """The replica answers a lookup whose keys match nothing without running its SQL; that is
    right only because each statement is a filter (aggregates grouped) of its table's rows."""
    store = Store(store_path)
    table = "proj_exclusions" if name == "exclusions" else "proj_decisions"
    empty = store.query(f"SELECT * FROM {table} LIMIT 0")
    con = duckdb.connect()
    con.register(table, empty)
    params = {k: (5 if k == "limit" else "sha256:x") for k in _NULL_PARAMS[name]}
    assert con.execute(statement(name), params).to_arrow_table().num_rows == 0


def test_key_index_finds_every_position_across_merges():
    rng = random.Random(3)
    index = KeyIndex()
    index.MERGE_AT = 50  # merge often: positions live in the sorted part and the tail
    keys: list[int] = []
    for _ in range(40):
        chunk = [rng.randrange(30) for _ in range(rng.randrange(1, 20))]
        index.append(np.array(chunk, dtype=np.int64), len(keys))
        keys += chunk
        for key in range(-1, 31):
            want = [i for i, k in enumerate(keys) if k == key]
            assert sorted(index.find(key).tolist()) == want


def test_one_replica_per_store_object(store_path):
    a, b = Store(store_path), Store(store_path)
    assert replica_of(a) is replica_of(a) and replica_of(a) is not replica_of(b)


def test_row_store_takes_the_rows_at_positions_across_merges():
    import pyarrow as pa

    from queries.replica import RowStore

    schema = pa.schema([("i", pa.int64()), ("s", pa.string())])
    rows = RowStore(schema)
    rows.MERGE_AT = 16
    n = 0
    rng = random.Random(5)
    for _ in range(30):
        k = rng.randrange(0, 9)
        rows.append(
            pa.table({"i": range(n, n + k), "s": [f"r{j}" for j in range(n, n + k)]}, schema)
        )
        n += k
        want = sorted(rng.sample(range(n), min(n, 7)))
        got = rows.take(np.array(list(reversed(want)), dtype=np.int64))
        assert got.column("i").to_pylist() == want
        assert got.column("s").to_pylist() == [f"r{j}" for j in want]


def test_lookups_during_writes_end_where_a_fresh_replica_starts(store_path):
    """Lookups interleaved with another Store's ingests (a thread writing run after run):
    every refresh appends exactly what was written, so at the end the long-lived replica
    answers as one built from scratch does."""
    import threading

    reader, writer = Store(store_path), Store(store_path)
    done = threading.Event()

    def write() -> None:
        try:
            for r in range(12):
                _ingest(writer, f"w{r:02d}", small_run(2, tag=f"w{r}"))
        finally:
            done.set()

    thread = threading.Thread(target=write)
    thread.start()
    seen = []
    while not done.is_set():
        ctx = lookups.prompt_context(
            reader, MEASUREMENT_KEY, "sha256:bundle", "cpu-interpreter", "x"
        )
        seen.append(len(ctx[0]))
    thread.join()
    assert seen == sorted(seen)  # a reader never sees the store go back
    final = lookups.prompt_context(reader, MEASUREMENT_KEY, "sha256:bundle", "cpu-interpreter", "x")
    fresh = lookups.prompt_context(
        Store(store_path), MEASUREMENT_KEY, "sha256:bundle", "cpu-interpreter", "x"
    )
    assert final == fresh and len(final[0]) == 12 * 2
    assert [(e.signature, e.occurrences) for e in final[1]] == [("BLOCK=64,num_warps=4", 12)]


def test_lookups_answer_from_the_rows_held_while_the_store_stays_locked_after_a_write(store_path):
    """A busy store never ends a run: another process wrote, then holds the store locked past
    the timeout; lookups answer from the replica a generation late, then catch up."""
    store = Store(store_path, lock_timeout_s=0.3)
    _ingest(store, "r1", small_run(2))
    before = lookups.measured_candidates(store, MEASUREMENT_KEY)
    _ingest(Store(store_path), "r2", small_run(1, tag="later"))
    with store_lock(store.path, exclusive=True, timeout_s=1.0):
        assert lookups.measured_candidates(store, MEASUREMENT_KEY) == before
    after = lookups.measured_candidates(store, MEASUREMENT_KEY)
    assert ("r2", "c001") in {(m.run_id, m.candidate_id) for m in after}
