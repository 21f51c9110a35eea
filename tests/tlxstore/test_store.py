"""What the DuckDB file store does beyond the conformance suite: its file, its lock, its version."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from store_conformance import envelopes

from tlxstore.errors import StoreBusyError, StoreError, StoreTooNewError
from tlxstore.locking import lock_path
from tlxstore.store import STORE_SCHEMA_VERSION, Store
from tlxstore.testing import small_run


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
