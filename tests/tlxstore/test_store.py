"""What the DuckDB file store does beyond the conformance suite: its file, its lock, its version."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner
from support import history_store
from support.files import unwritable

import queries
from cli.main import main
from tlxstore.errors import EventConflictError, StoreBusyError, StoreError, StoreTooNewError
from tlxstore.events import BASELINE_ID, DecisionMade, Envelope, Outcome, new_event_id
from tlxstore.locking import lock_path
from tlxstore.store import Store
from tlxstore.store.projection import BULK_PASS, COMPACT_EVERY
from tlxstore.store.schema import STORE_SCHEMA_VERSION
from tlxstore.store.sql import store_sql
from tlxstore.testing import (
    as_schema_v8,
    as_schema_v9,
    as_schema_v10,
    as_schema_v11,
    candidate_events,
    cut_short,
    envelopes,
    leave_behind,
    run_started,
    small_run,
)


def test_a_new_store_records_its_schema_version(store_path):
    Store(store_path)
    con = duckdb.connect(str(store_path), read_only=True)
    assert con.execute(
        "SELECT value FROM tlxdb_meta WHERE key='store_schema_version'"
    ).fetchone() == (str(STORE_SCHEMA_VERSION),)
    con.close()


def test_a_store_from_a_newer_tlxdb_is_refused_and_left_alone(store_path):
    Store(store_path).ingest(envelopes("r1", small_run(1)))
    con = duckdb.connect(str(store_path))
    con.execute("UPDATE tlxdb_meta SET value = '99' WHERE key = 'store_schema_version'")
    con.close()
    with pytest.raises(
        StoreTooNewError, match=r"schema v99, written by a newer tlxdb .* upgrade tlxdb"
    ):
        Store(store_path)
    con = duckdb.connect(str(store_path), read_only=True)
    assert con.execute("SELECT count(*) FROM events").fetchone() == (len(small_run(1)),)
    con.close()


def test_a_duckdb_file_of_something_else_is_not_a_store(store_path):
    con = duckdb.connect(str(store_path))
    con.execute("CREATE TABLE mine (x INT)")
    con.close()
    with pytest.raises(StoreError, match="a DuckDB file but not a tlxdb store"):
        Store(store_path)


def test_a_file_that_is_not_duckdb_is_refused_without_being_touched(store_path):
    store_path.write_bytes(b"these are my notes\n" * 100)
    with pytest.raises(StoreError, match="cannot be opened"):
        Store(store_path)
    assert store_path.read_bytes() == b"these are my notes\n" * 100


def test_a_store_in_an_unwritable_folder_is_refused(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        folder = next((f for f in (ro, Path("/sys")) if not _can_create_in(f)), None)  # root: sysfs
        if folder is None:
            pytest.skip("no unwritable folder available to this user")
        with pytest.raises(StoreError, match="is not writable"):
            Store(folder / "store.duckdb")
    finally:
        ro.chmod(0o755)


def _can_create_in(folder: Path) -> bool:
    try:
        (folder / "probe").touch()
    except OSError:
        return False
    (folder / "probe").unlink()
    return True


def test_a_folder_is_not_a_store_path(tmp_path):
    with pytest.raises(StoreError, match="is a folder"):
        Store(tmp_path)


def test_open_without_create_refuses_a_missing_store(store_path):
    with pytest.raises(StoreError, match="no store at"):
        Store(store_path, create=False)


def test_a_lock_held_too_long_gives_store_busy_not_a_duckdb_error(store_path):
    store = Store(store_path, lock_timeout_s=0.3)
    fd = os.open(lock_path(store_path), os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        t0 = time.monotonic()
        with pytest.raises(
            StoreBusyError, match="stayed locked by other tlxdb processes for 0.3 s"
        ):
            store.ingest(envelopes("r1", small_run(1)))
        assert time.monotonic() - t0 >= 0.3
    finally:
        os.close(fd)
    assert store.ingest(envelopes("r1", small_run(1))) == len(small_run(1))


def test_readers_share_the_lock(store_path):
    store = Store(store_path)
    store.ingest(envelopes("r1", small_run(1)))
    fd = os.open(lock_path(store_path), os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_SH)  # another reader
    try:
        assert store.run_ids() == ["r1"]
    finally:
        os.close(fd)


def test_a_foreign_program_holding_the_file_is_waited_for(store_path):
    """A duckdb shell (outside tlxdb's lock) holding the file read-write delays, never breaks, a write."""
    store = Store(store_path, lock_timeout_s=20)
    code = (
        "import duckdb, sys, time\n"
        f"con = duckdb.connect({str(store_path)!r})\n"
        "print('held', flush=True)\n"
        "time.sleep(1.0)\n"
        "con.close()\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    assert store.ingest(envelopes("r1", small_run(1))) == len(small_run(1))
    holder.wait(timeout=10)


def _wal(store_path: Path) -> Path:
    return store_path.with_name(store_path.name + ".wal")


def _candidates(run_id: str, n: int) -> list:
    events = [run_started()]
    for i in range(n):
        events += candidate_events(f"c{i:04d}", f"def k(): return {i}  # {run_id}", samples=10)
    now = datetime.now(UTC)
    return [
        Envelope(event_id=f"{run_id}-{i}", run_id=run_id, seq=i, recorded_at=now, event=e)
        for i, e in enumerate(events)
    ]


def test_no_wal_outlives_an_ingest_small_or_large(store_path):
    store = Store(store_path)
    store.ingest(envelopes("small", small_run(1)))
    assert not _wal(store_path).exists()
    large = _candidates("large", 300)  # a few MB: written straight into the file at COMMIT
    assert store.ingest(large) == len(large)
    assert not _wal(store_path).exists()
    assert store.event_count() == len(small_run(1)) + len(large)


class _NeverCheckpoints(Store):
    """A writer that commits to the WAL and dies before any checkpoint (as a kill -9 would)."""

    def _new_instance(self):
        con = super()._new_instance()
        con.execute("SET wal_autocheckpoint = '1GB'")
        con.execute("SET auto_checkpoint_skip_wal_threshold = 1000000000")
        return con


def test_a_store_left_with_a_large_wal_is_read_whole_and_checkpointed_by_the_next_write(
    store_path,
):
    Store(store_path).close()
    left = _candidates("left", 300)
    _NeverCheckpoints(store_path).ingest(left)
    assert _wal(store_path).stat().st_size > 1_000_000
    reader = Store(store_path)
    assert reader.run_envelopes("left") == left  # a read-only attach replays it
    assert _wal(store_path).exists()  # and leaves it alone
    more = envelopes("more", small_run(1))
    assert Store(store_path).ingest(more) == len(more)
    assert not _wal(store_path).exists()
    con = duckdb.connect(str(store_path), read_only=True)  # the file alone holds everything
    assert con.execute("SELECT count(*) FROM events").fetchone() == (len(left) + len(more),)
    con.close()
    assert reader.run_envelopes("left") == left


def _row_groups(store: Store, table: str) -> int:
    (n,) = (
        store.query(f"SELECT count(DISTINCT row_group_id) AS n FROM pragma_storage_info('{table}')")
        .column("n")
        .to_pylist()
    )
    return n


def test_small_row_groups_are_merged_at_every_compact_every_th_ingest(store_path):
    store = Store(store_path)
    store.ingest(envelopes("loop", [run_started()]))
    seq = 1
    for i in range(2, COMPACT_EVERY + 1):  # ingests 2 .. COMPACT_EVERY, as the loop makes them
        events = candidate_events(f"c{i}", f"def k(): return {i}", cases=("a",))
        store.ingest(envelopes("loop", events, start=seq))
        seq += len(events)
        if i < COMPACT_EVERY:  # each commit wrote its own row group and merged nothing
            assert _row_groups(store, "events") == i
            assert _row_groups(store, "proj_candidates") == i - 1
    # the COMPACT_EVERY-th ingest merged them into one
    assert _row_groups(store, "events") == 1
    assert _row_groups(store, "proj_candidates") == 1
    assert store.event_count() == seq
    assert store.ingest(envelopes("loop", events, start=seq - len(events))) == 0  # no merge


def test_an_ingest_reports_where_its_time_went(store_path):
    store = Store(store_path)
    assert store.last_ingest is None
    batch = _candidates("timed", 20)
    t0 = time.perf_counter()
    store.ingest(batch)
    wall_ms = (time.perf_counter() - t0) * 1e3
    timings = store.last_ingest
    assert (timings.events, timings.added) == (len(batch), len(batch))
    parts = (timings.table_ms, timings.lock_attach_ms, timings.sql_ms, timings.commit_ms)
    assert all(p > 0 for p in parts) and timings.release_ms >= 0
    assert timings.total_ms <= wall_ms
    store.ingest(batch)
    assert (store.last_ingest.events, store.last_ingest.added) == (len(batch), 0)


def _storage_version(store_path: Path) -> str:
    con = duckdb.connect()
    con.execute(f"ATTACH '{store_path}' AS s (READ_ONLY)")
    (tags,) = con.execute(
        "SELECT tags FROM duckdb_databases() WHERE database_name = 's'"
    ).fetchone()
    con.close()
    return tags["storage_version"]


def test_a_new_store_is_written_in_this_duckdbs_storage_format(store_path):
    Store(store_path).ingest(envelopes("r1", small_run(1)))
    major, minor = duckdb.__version__.split(".")[:2]
    assert _storage_version(store_path) == f"v{major}.{minor}.0+"


def test_a_store_whose_file_lost_its_trailing_free_blocks_is_not_damaged(store_path):
    """A compaction frees blocks; DuckDB cuts free blocks off the file's end but still counts them
    in total_blocks. Such a file is whole: it opens, and every run reads back."""
    store = Store(store_path)
    runs = 3 * COMPACT_EVERY + 1  # enough compactions to leave free blocks at the file's end
    for r in range(runs):
        store.ingest(envelopes(f"w{r}", small_run(2, tag=f"w{r}")))
    store.close()
    con = duckdb.connect(str(store_path), read_only=True)
    block, total = con.execute(
        "SELECT block_size, total_blocks FROM pragma_database_size()"
    ).fetchone()
    con.close()
    assert store_path.stat().st_size < 3 * 4096 + block * total  # free blocks cut off the end
    assert len(Store(store_path).run_ids()) == runs


def test_a_store_in_an_older_storage_format_is_used_as_it_is_never_upgraded(store_path):
    con = duckdb.connect(str(store_path))  # DuckDB's default, readable by every 1.x
    con.execute(store_sql("schema"))
    con.execute(
        "INSERT INTO tlxdb_meta VALUES ('store_schema_version', ?), ('created_at', 'then')",
        [str(STORE_SCHEMA_VERSION)],
    )
    con.close()
    old = _storage_version(store_path)
    assert old != _storage_version_of_a_new_store(store_path.parent)
    store = Store(store_path)
    envs = envelopes("r1", small_run(2))
    assert store.ingest(envs) == len(envs)
    assert store.run_envelopes("r1") == envs
    assert _storage_version(store_path) == old


def _storage_version_of_a_new_store(folder: Path) -> str:
    Store(folder / "new.duckdb").close()
    return _storage_version(folder / "new.duckdb")


# ---- bulk batches, and projections an older tlxdb left behind ----------------------------------------------------------


def _bulk(run_id: str) -> list[Envelope]:
    events = small_run(95, tag=run_id)
    assert len(events) >= BULK_PASS
    return envelopes(run_id, events)


V4_COLUMNS = {
    "run_heads": ("last_event_at",),
    "proj_runs": (
        "architecture", "num_sms", "tlxdb_version", "cuda_version", "resumed_from", "kernel_file", "kernel_stem",
    ),
    "proj_candidates": (
        "change", "evidence", "expected_effect", "risk", "tokens_in", "tokens_out", "cost_usd", "replays",
    ),
}  # fmt: skip
V4_TABLES = (
    "proj_finishes",
    "proj_revalidations",
    "proj_case_speedups",
    "proj_exchanges",
    "proj_baselines",
)


def _with_instances(events: list) -> list:
    """The events, each decision of a candidate recording an instance estimate and two pairs."""
    return [
        e.model_copy(
            update={"instance_df": 4, "instance_sigma": 0.0123, "instance_pairs": [1.5, 1.4]}
        )
        if isinstance(e, DecisionMade) and e.candidate_id != BASELINE_ID
        else e
        for e in events
    ]


_as_v10 = as_schema_v10  # what tlxdb's store schema v10 wrote
_as_v9 = as_schema_v9  # v9
_as_v8 = as_schema_v8  # and v8


def _as_v7(store_path: Path) -> None:
    """Turn a store into what tlxdb's store schema v7 wrote: no proj_run_inputs, and
    proj_candidates.remeasures named replays."""
    _as_v8(store_path)
    con = duckdb.connect(str(store_path))
    con.execute("DROP TABLE proj_run_inputs")
    con.execute("ALTER TABLE proj_candidates RENAME COLUMN remeasures TO replays")
    con.execute("UPDATE tlxdb_meta SET value = '7' WHERE key = 'store_schema_version'")
    con.close()


def _as_v6(store_path: Path) -> None:
    """Turn a store into what tlxdb's store schema v6 wrote: no machine states (it could hold
    none: MachineSampled did not exist)."""
    _as_v7(store_path)
    con = duckdb.connect(str(store_path))
    assert con.execute("SELECT count(*) FROM proj_machine").fetchone() == (0,)
    con.execute("DROP TABLE proj_machine")
    con.execute("UPDATE tlxdb_meta SET value = '6' WHERE key = 'store_schema_version'")
    con.close()


def _as_v5(store_path: Path) -> None:
    """Turn a store into what tlxdb's store schema v5 wrote: no windows, no notes."""
    _as_v6(store_path)
    con = duckdb.connect(str(store_path))
    con.execute("ALTER TABLE proj_samples DROP COLUMN window_id")
    con.execute("DROP TABLE proj_notes")
    con.execute("UPDATE tlxdb_meta SET value = '5' WHERE key = 'store_schema_version'")
    con.close()


def _as_v4(store_path: Path) -> None:
    """Turn a store into what tlxdb's store schema v4 wrote: no proj_run_candidates."""
    _as_v5(store_path)
    con = duckdb.connect(str(store_path))
    con.execute("DROP TABLE proj_run_candidates")
    con.execute("UPDATE tlxdb_meta SET value = '4' WHERE key = 'store_schema_version'")
    con.close()


def _as_v3(store_path: Path) -> None:
    """Turn a store into what tlxdb's store schema v3 wrote: none of v4's projected columns and
    tables."""
    _as_v4(store_path)
    con = duckdb.connect(str(store_path))
    for table, columns in V4_COLUMNS.items():
        for column in columns:
            con.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    for table in V4_TABLES:
        con.execute(f"DROP TABLE {table}")
    con.execute("UPDATE tlxdb_meta SET value = '3' WHERE key = 'store_schema_version'")
    con.close()


@pytest.mark.parametrize("older", [_as_v10, _as_v9, _as_v8, _as_v7, _as_v6, _as_v5, _as_v4, _as_v3])
def test_an_older_store_is_upgraded_on_open_and_every_view_answers_as_before(tmp_path, older):
    """v4 projects what the views used to parse out of the events, v5 each run's candidate count
    and best promoted candidate, v6 windows and notes, v7 machine states, v8 each run's case
    parameters and prior runs, v9 the instance of each sample, v10 what a decision's interval
    carried of instances; a v9 .. v3 store gets them on open, and every view answers exactly as it
    did (the history test store: every event type; a decision with instance pairs)."""
    path = history_store.build(tmp_path / "store.duckdb")
    store = Store(path)
    store.ingest(envelopes("cut", [run_started(), *cut_short("c001", "def k(): return 7")]))
    store.ingest(envelopes("pairs", _with_instances(small_run(1, tag="pairs"))))
    tables = (*V4_TABLES, *V4_COLUMNS, "proj_run_candidates", "proj_run_inputs", "proj_samples")
    tables += ("proj_decisions",)
    projected = {t: store.query(f"SELECT * FROM {t} ORDER BY ALL") for t in tables}
    views = {n: queries.query(store, f"SELECT * FROM {n} ORDER BY ALL") for n in queries.names()}
    assert projected["proj_case_speedups"].num_rows and projected["proj_finishes"].num_rows
    assert len(projected["proj_run_candidates"].column("promoted").drop_null()) > 1
    store.close()
    older(store_path=path)
    store = Store(path)
    assert store.query(
        "SELECT value FROM tlxdb_meta WHERE key = 'store_schema_version'"
    ).to_pylist() == [{"value": str(STORE_SCHEMA_VERSION)}]
    for t in tables:
        assert store.query(f"SELECT * FROM {t} ORDER BY ALL") == projected[t], t
    for n in queries.names():
        assert queries.query(store, f"SELECT * FROM {n} ORDER BY ALL") == views[n], n


def test_an_upgrade_cut_short_leaves_a_whole_older_store_that_the_next_open_carries_on(
    tmp_path, monkeypatch
):
    """Each step is a transaction of its own: a v8 store whose v10 step fails is left at v9, the
    v9 step kept and nothing of v10's; the next open takes the v10 step and the views answer as
    before."""
    from tlxstore.store import schema

    path = tmp_path / "store.duckdb"
    store = Store(path)
    store.ingest(envelopes("pairs", _with_instances(small_run(1, tag="pairs"))))
    views = {n: queries.query(store, f"SELECT * FROM {n} ORDER BY ALL") for n in queries.names()}
    store.close()
    as_schema_v8(path)

    def broken(name: str) -> str:
        return (
            "SELECT no_such_column FROM proj_decisions"
            if name == "upgrade_v10"
            else store_sql(name)
        )

    monkeypatch.setattr(schema, "store_sql", broken)
    with pytest.raises(duckdb.BinderException):
        Store(path)
    con = duckdb.connect(str(path), read_only=True)
    version = con.execute("SELECT value FROM tlxdb_meta WHERE key = 'store_schema_version'")
    assert version.fetchone() == ("9",)
    columns = {r[0] for r in con.execute("DESCRIBE proj_decisions").fetchall()}
    assert "instance_df" not in columns
    assert con.execute("SELECT count(*) FROM proj_samples WHERE instance IS NULL").fetchone() == (
        0,
    )
    con.close()
    monkeypatch.undo()
    store = Store(path)
    for n in queries.names():
        assert queries.query(store, f"SELECT * FROM {n} ORDER BY ALL") == views[n], n


def _as_v2(store_path: Path) -> None:
    """Turn a store into what tlxdb's store schema v2 wrote: no proj_failures, no
    proj_decisions.measured."""
    _as_v3(store_path)
    con = duckdb.connect(str(store_path))
    con.execute("DROP TABLE proj_failures")
    con.execute("ALTER TABLE proj_decisions DROP COLUMN measured")
    con.execute("UPDATE tlxdb_meta SET value = '2' WHERE key = 'store_schema_version'")
    con.close()


def test_a_v2_store_is_upgraded_on_open_and_its_decisions_say_whether_they_were_measured(
    store_path,
):
    store = Store(store_path)
    store.ingest(envelopes("cut", [run_started(), *cut_short("c001", "def k(): return 7")]))
    store.ingest(envelopes("whole", small_run(1)))
    before = store.query("SELECT * FROM proj_decisions ORDER BY ALL")
    store.close()
    _as_v2(store_path)
    store = Store(store_path)
    assert store.query(
        "SELECT value FROM tlxdb_meta WHERE key = 'store_schema_version'"
    ).to_pylist() == [{"value": str(STORE_SCHEMA_VERSION)}]
    assert store.query("SELECT * FROM proj_decisions ORDER BY ALL") == before
    measured = store.query("SELECT run_id, bool_and(measured) AS m FROM proj_decisions GROUP BY 1")
    assert dict(zip(*measured.to_pydict().values(), strict=True)) == {"cut": False, "whole": True}


def _as_v1(store_path: Path) -> None:
    """Turn a store into what tlxdb's store schema v1 wrote: no events.pos, no projection_state."""
    _as_v2(store_path)
    con = duckdb.connect(str(store_path))
    con.execute("ALTER TABLE events DROP COLUMN pos")
    con.execute("DROP TABLE projection_state")
    con.execute("UPDATE tlxdb_meta SET value = '1' WHERE key = 'store_schema_version'")
    con.close()


def test_a_v1_store_is_upgraded_on_open_and_keeps_its_projections(store_path):
    store = Store(store_path)
    old = envelopes("old", small_run(3))
    store.ingest(old)
    before = {
        t: store.query(f"SELECT * FROM {t} ORDER BY ALL")
        for t in ("proj_decisions", "proj_samples")
    }
    store.close()
    _as_v1(store_path)
    store = Store(store_path)
    con = duckdb.connect(str(store_path), read_only=True)
    assert con.execute(
        "SELECT value FROM tlxdb_meta WHERE key = 'store_schema_version'"
    ).fetchone() == (str(STORE_SCHEMA_VERSION),)
    assert con.execute("SELECT count(*) FROM events WHERE pos IS NULL").fetchone() == (len(old),)
    con.close()
    assert store.projection_lag() == 0
    for table, rows in before.items():  # nothing projected twice
        assert store.query(f"SELECT * FROM {table} ORDER BY ALL") == rows
    store.ingest(_bulk("new"))
    n = store.query("SELECT count(*) AS n FROM proj_decisions").column("n")[0].as_py()
    assert n == 4 + 96


def test_a_v1_store_holding_uuid7_shaped_ids_still_refuses_their_reuse(store_path):
    """v1 keyed every id by md5; after the upgrade such an id is keyed by its own bits, and a
    reuse of it in another run is still found."""
    store = Store(store_path)
    env = Envelope(
        event_id=new_event_id(),
        run_id="r1",
        seq=0,
        recorded_at=datetime.now(UTC),
        event=run_started(),
    )
    store.ingest([env])
    store.close()
    _as_v1(store_path)
    con = duckdb.connect(str(store_path))
    con.execute(store_sql("macros"))
    con.execute("UPDATE events SET id_key = tlx_key(event_id)")  # as v1 stored it
    con.close()
    store = Store(store_path)
    with pytest.raises(EventConflictError, match=f"{env.event_id} is already stored as run r1"):
        store.ingest([env.model_copy(update={"run_id": "r9"})])


def test_a_store_whose_views_lag_and_that_is_not_writable_says_so_in_one_line(store_path):
    store = Store(store_path)
    bulk = _bulk("r1")
    store.ingest(bulk)
    store.close()
    leave_behind(store_path)
    with unwritable(store_path):
        out = CliRunner().invoke(
            main, ["query", "SELECT count(*) FROM proj_candidates", "--store", str(store_path)]
        )
        assert out.exit_code == 1, out.output
        (line,) = out.stderr.strip().splitlines()
        assert f"{len(bulk)} events of store {store_path} are not in its views yet" in line
        assert "not writable" in line
        assert Store(store_path).run_envelopes("r1") == bulk  # the events themselves read as ever
    assert Store(store_path).projection_lag() == len(bulk)


def test_a_v1_store_that_cannot_be_upgraded_is_read_as_it_is(store_path):
    Store(store_path).ingest(envelopes("r1", small_run(2)))
    _as_v1(store_path)
    with unwritable(store_path):
        store = Store(store_path, create=False)
        assert store.projection_lag() == 0
        n = store.query("SELECT count(*) AS n FROM proj_decisions").column("n")[0].as_py()
        assert n == 3
    con = duckdb.connect(str(store_path), read_only=True)
    assert con.execute(
        "SELECT value FROM tlxdb_meta WHERE key = 'store_schema_version'"
    ).fetchone() == ("1",)
    con.close()


def _decided_again(candidate_id: str, outcome: Outcome, speedup: float) -> DecisionMade:
    return DecisionMade(candidate_id=candidate_id, outcome=outcome, reason="again", speedup=speedup)


# c002 is the best (2.0) until it is decided again and refused; then the best is c001 (1.25: c004
# ties it, c001 comes first), never c003 (refused at 2.5) nor `ghost` (decided, never proposed)
CANDIDATES = [
    candidate_events(BASELINE_ID, "def k(): pass"),
    candidate_events("c001", "def k(): return 1", base_us=80.0, outcome=Outcome.PROMOTED),
    candidate_events("c002", "def k(): return 2", base_us=50.0, outcome=Outcome.PROMOTED),
    candidate_events("c003", "def k(): return 3", base_us=40.0, outcome=Outcome.REJECTED),
    candidate_events("c004", "def k(): return 4", base_us=80.0, outcome=Outcome.PROMOTED),
    [
        _decided_again("c002", Outcome.REJECTED, 2.0),
        _decided_again("ghost", Outcome.PROMOTED, 9.0),
        _decided_again("c003", Outcome.FAILED, 2.5),
    ],
]


@pytest.mark.parametrize("per_ingest", [1, len(CANDIDATES)], ids=["loop", "one pass"])
def test_each_run_keeps_its_candidate_count_and_best_promoted_candidate_pass_by_pass(
    store_path, per_ingest
):
    """proj_run_candidates, which the runs view reads, holds the number of candidates (the
    baseline aside) and what every decision of the run says, whether its decisions come one
    ingest (one pass) at a time, as the loop's do, or all in one: a candidate decided again and
    refused leaves the promoted ones, and the next best becomes the best."""
    store = Store(store_path)
    store.ingest(envelopes("r1", [run_started()]))
    seq = 1
    for i in range(0, len(CANDIDATES), per_ingest):
        batch = [e for events in CANDIDATES[i : i + per_ingest] for e in events]
        store.ingest(envelopes("r1", batch, start=seq))
        seq += len(batch)
        if i == 2:  # the baseline, c001 and c002 stored
            assert _promoted(store) == [("r1", 2, {("c001", 1.25), ("c002", 2.0)}, "c002", 2.0)]
    assert store.projection_lag() == 0
    assert _promoted(store) == [("r1", 4, {("c001", 1.25), ("c004", 1.25)}, "c001", 1.25)]
    assert queries.query(store, "SELECT candidates FROM runs").to_pylist() == [{"candidates": 4}]


def _promoted(store: Store) -> list[tuple]:
    rows = store.query("SELECT * FROM proj_run_candidates ORDER BY run_id").to_pylist()
    return [
        (
            r["run_id"],
            r["candidates"],
            {tuple(p.values()) for p in r["promoted"] or ()},
            r["best_candidate_id"],
            r["best_speedup"],
        )
        for r in rows
    ]


def test_bulk_ingests_merge_nothing_and_a_pass_catching_up_merges_every_table(store_path):
    """A bulk ingest is its own pass and merges only as every COMPACT_EVERY-th one does; a pass
    that catches up a store an older tlxdb left behind merges what it covers."""
    store = Store(store_path)
    for i in range(3):
        store.ingest(_bulk(f"bulk{i}"))
    assert store.projection_lag() == 0
    store.close()
    con = duckdb.connect(str(store_path), read_only=True)
    (groups,) = con.execute(
        "SELECT count(DISTINCT row_group_id) FROM pragma_storage_info('events')"
    ).fetchone()
    con.close()
    assert groups == 3  # one per ingest, none merged
    leave_behind(store_path)
    store = Store(store_path)
    assert store.project() == 3 * len(_bulk("x"))
    assert _row_groups(store, "events") == 1 and _row_groups(store, "proj_samples") == 1


def test_a_store_an_older_tlxdb_left_behind_is_caught_up_by_the_next_read(store_path):
    bulk = _bulk("r1")
    Store(store_path).ingest(bulk)
    want = Store(store_path).query("SELECT * FROM proj_candidates ORDER BY ALL")
    assert leave_behind(store_path) == len(bulk)
    store = Store(store_path)
    assert store.projection_lag() == len(bulk)
    assert store.query("SELECT * FROM proj_candidates ORDER BY ALL") == want
    assert store.projection_lag() == 0


def test_new_event_ids_are_uuid7_and_their_keys_grow_with_time(store_path):
    ids = [new_event_id() for _ in range(50)]
    time.sleep(0.003)
    later = new_event_id()
    assert all(uuid.UUID(i).version == 7 and uuid.UUID(i).hex == i for i in ids)
    assert len(set(ids)) == len(ids) and max(ids) < later
    con = duckdb.connect()
    con.execute(store_sql("macros"))
    keys = [con.execute("SELECT tlx_id_key(?)", [i]).fetchone()[0] for i in (*ids, later)]
    assert keys == [int(i[:15], 16) for i in (*ids, later)]  # the id's own first 60 bits
    for other in ("r1-0", uuid.uuid4().hex, "z" * 12 + "7" + "z" * 19):  # any other id: its md5
        assert con.execute("SELECT tlx_id_key(?) = tlx_key(?)", [other, other]).fetchone() == (
            True,
        )


def test_a_reused_uuid7_id_is_found_among_many_blocks(store_path):
    store = Store(store_path)
    first = [
        Envelope(
            event_id=new_event_id(), run_id="r1", seq=i, recorded_at=datetime.now(UTC), event=e
        )
        for i, e in enumerate(small_run(95))
    ]
    store.ingest(first)
    for i in range(3):
        store.ingest(_bulk(f"later{i}"))
    stolen = first[500].model_copy(update={"run_id": "r9", "seq": 0})
    with pytest.raises(
        EventConflictError, match=f"{first[500].event_id} is already stored as run r1 seq 500"
    ):
        store.ingest([stolen])


def test_a_reader_sees_a_bulk_ingest_another_store_object_made_after_its_last_read(store_path):
    reader, writer = Store(store_path), Store(store_path)
    count = "SELECT count(*) AS n FROM proj_candidates"
    assert reader.query(count).column("n")[0].as_py() == 0  # no lag seen at this generation
    bulk = _bulk("r1")
    writer.ingest(bulk)
    assert reader.query(count).column("n")[0].as_py() == 96
    assert writer.projection_lag() == 0


def test_a_store_that_cannot_be_written_keeps_its_stored_views(store_path):
    store = Store(store_path)
    assert store.define_views([("one", "SELECT 1 AS x")], "d1") is True
    assert store.define_views([("one", "SELECT 1 AS x")], "d1") is False  # current: no write
    store.close()
    with unwritable(store_path):
        ro = Store(store_path, create=False)
        assert ro.define_views([("two", "SELECT 2 AS x")], "d2") is False
        assert ro.query("SELECT x FROM one").column("x").to_pylist() == [1]
    con = duckdb.connect(str(store_path), read_only=True)
    assert con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall() == [
        ("one",)
    ]
    con.close()


# A matmul as the Triton tutorial writes it: a @triton.jit activation helper above the kernel.
HELPER_FIRST = """import triton
import triton.language as tl


@triton.jit
def leaky_relu(x):
    return tl.where(x >= 0, x, 0.01 * x)


@triton.autotune(configs=[triton.Config({"BLOCK_M": 32})], key=["M"])
@triton.jit
def matmul_kernel(a_ptr, c_ptr, M, BLOCK_M: tl.constexpr):
    x = leaky_relu(tl.load(a_ptr + tl.arange(0, BLOCK_M)))
    tl.store(c_ptr + tl.arange(0, BLOCK_M), x)


def matmul(a):
    c = a.new_empty(a.shape)
    grid = lambda META: (triton.cdiv(a.shape[0], META["BLOCK_M"]),)
    matmul_kernel[grid](a, c, a.shape[0])
    return c
"""


def test_a_run_is_known_by_the_kernel_it_launches_not_a_jit_helper_above_it(store_path):
    """A new user's tutorial matmul was filed as `leaky_relu @ ...` (the first @triton.jit
    function of the file) and `tlxdb history matmul_kernel` found no run. The kernel is the
    first one the source launches (`name[grid](...)`); a v10 store is re-projected on open."""
    store = Store(store_path)
    store.ingest(envelopes("mm", [run_started(), *candidate_events(BASELINE_ID, HELPER_FIRST)]))
    named = "SELECT entry_point, kernel_id FROM run_identity"
    assert queries.query(store, named).to_pylist() == [
        {"entry_point": "matmul_kernel", "kernel_id": "matmul_kernel @ k/kernel.py"}
    ]
    store.close()
    as_schema_v10(store_path)
    con = duckdb.connect(str(store_path), read_only=True)
    assert con.execute("SELECT entry_point FROM proj_baselines").fetchall() == [("leaky_relu",)]
    con.close()
    store = Store(store_path)
    assert queries.query(store, named).to_pylist()[0]["entry_point"] == "matmul_kernel"


def test_a_runs_candidate_count_leaves_the_baseline_aside_and_a_v11_store_is_corrected(
    store_path,
):
    """`tlxdb runs` read 13 candidates for a run of 12 (the H100 softmax run of 2026-12-05): the
    baseline's proposal was counted. The count is the candidates tried, as the result JSON's
    experiments; a v11 store's counts are corrected on open, and a run proposed in two ingests
    (the baseline in the first) counts the same."""
    store = Store(store_path)
    whole, parts = small_run(3), small_run(2, tag="b")
    store.ingest(envelopes("whole", whole))
    cut = next(i for i, e in enumerate(parts) if getattr(e, "candidate_id", None) == "c001")
    store.ingest(envelopes("parts", parts[:cut]))
    store.ingest(envelopes("parts", parts[cut:], start=cut))
    counts = "SELECT run_id, candidates FROM runs ORDER BY run_id"
    expected = [{"run_id": "parts", "candidates": 2}, {"run_id": "whole", "candidates": 3}]
    assert queries.query(store, counts).to_pylist() == expected
    store.close()
    as_schema_v11(store_path)
    con = duckdb.connect(str(store_path), read_only=True)
    stored = "SELECT candidates FROM proj_run_candidates ORDER BY run_id"
    assert con.execute(stored).fetchall() == [(3,), (4,)]
    con.close()
    store = Store(store_path)
    assert queries.query(store, counts).to_pylist() == expected
