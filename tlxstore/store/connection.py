"""How a Store reaches its file: one in-memory DuckDB instance per Store, kept for its lifetime;
each call ATTACHes the store file (read-only or read-write) under the store lock
(`tlxstore/locking.py`) and DETACHes it before releasing: a few ms, where opening a new DuckDB
instance per call costs tens. A backend overrides hooks: `_new_instance`, `_attach_statement` and
`_schema_sql` (tlxstore/ducklake.py); a store not in one local file (tlxstore/team.py) also
`_lock`, `_open`, `_close`, `_done_writing`, `_read_only_again`, `exists`, `location` and the
generation's.

SQL a user typed (`tlxdb query`) runs in a sandbox instead: a DuckDB instance of its own for the one
query, the store attached read-only, extensions neither installed nor loaded, files beyond the
store out of reach (unless the user allows reading files), and its configuration locked, so no
statement can undo any of it. The statement check (reading.check_read_only) comes on top."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Self

import duckdb

from tlxstore.config import settings
from tlxstore.disk import disk_full
from tlxstore.errors import StoreBusyError, StoreDamagedError, StoreError, StoreTooNewError
from tlxstore.locking import store_lock
from tlxstore.store.sql import ALIAS, one_line, sql_quoted, store_sql


@dataclass(frozen=True)
class Sandbox:
    """How far SQL a user typed may reach: the store alone, or also files (`allow_files`: reading
    the user's own files with read_parquet or read_csv; never writing, never extensions), and for
    how long: a query still running after `timeout_s` seconds is interrupted (QueryTimeoutError),
    so that it never holds the store long enough to keep a writer out past the lock timeout;
    and how much it may bring back: a result of more than `max_rows` rows is refused
    (QueryError) as soon as it passes them, before it fills the memory."""

    allow_files: bool = False
    timeout_s: float | None = None
    max_rows: int | None = None


# How DuckDB tells of a damaged file: a block cut off, or one whose checksum fails.
_DAMAGE_SIGNS = ("Could not read enough bytes", "Corrupt database file")
# How DuckDB tells that another process holds the file ("Could not set lock on file ...:
# Conflicting lock is held in ..."), in lower case.
_HELD_SIGNS = ("could not set lock", "conflicting lock")
_HEADER_BYTES = 3 * 4096  # a DuckDB file's main header and its two database headers


class Connections:
    """The store file at `path`, attached to this object's own DuckDB instance call by call."""

    def __init__(self, path: str | os.PathLike[str], lock_timeout_s: float | None) -> None:
        self.path = Path(path).expanduser().absolute()
        self.lock_timeout_s = (
            lock_timeout_s if lock_timeout_s is not None else settings().lock_timeout_s
        )
        self._mutex = threading.RLock()
        self._instance: duckdb.DuckDBPyConnection | None = None

    @property
    def location(self) -> str:
        """The store as a user names it (in messages, and to open it again)."""
        return str(self.path)

    def exists(self) -> bool:
        """Whether the store has been created (a folder, a FIFO or a device is refused: opening
        one would hang or read what is not a store)."""
        if self.path.is_dir():
            raise StoreError(
                f"store path {self.path} is a folder; give a file such as {self.path / 'store.duckdb'}"
            )
        try:
            mode = self.path.stat().st_mode
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise StoreError(f"store path {self.path} cannot be read: {exc.strerror}") from None
        if not stat.S_ISREG(mode):
            raise StoreError(f"store path {self.path} is not a regular file; give a store file")
        return True

    def runs_dir(self) -> Path:
        """The host-local folder where runs write their output by default."""
        return self.path.parent / "runs"

    def close(self) -> None:
        """Drop this Store's in-memory DuckDB instance (it is recreated on the next call)."""
        with self._mutex:
            if self._instance is not None:
                self._instance.close()
                self._instance = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _connect(
        self, write: bool, sandbox: Sandbox | None = None
    ) -> Iterator[duckdb.DuckDBPyConnection]:
        """The store attached under its lock; with a sandbox, read-only in a fenced instance.
        A DuckDB error that shows the file damaged leaves as StoreDamagedError."""
        try:
            with self._attached(write, sandbox) as con:
                yield con
        except (duckdb.Error, OSError) as exc:
            failure = self.damage(exc) or disk_full(exc, f"store {self.location}")
            if failure is None:
                raise
            raise failure from None

    def damage(self, exc: BaseException) -> StoreDamagedError | None:
        """A StoreDamagedError naming the file and what to do, when `exc` shows the file
        damaged (cut short, or a block whose checksum fails); else None."""
        text = str(exc)
        if not any(sign in text for sign in _DAMAGE_SIGNS):
            return None
        return StoreDamagedError(
            f"store {self.location} is damaged ({one_line(exc)}); restore it from a backup, or move "
            "it aside and rebuild it with `tlxdb import` of your runs' output folders"
        )

    def _check_intact(self, con: duckdb.DuckDBPyConnection) -> None:
        """Refuse a store file shorter than the blocks its header counts (a copy cut short):
        at open, before any command has done work, not at the first read of a missing block."""
        row = con.execute(
            "SELECT block_size, used_blocks FROM pragma_database_size() WHERE database_name = ?",
            [ALIAS],
        ).fetchone()
        if row is None or not row[0] or self.path.with_name(self.path.name + ".wal").exists():
            return  # a DuckLake (it checks its files as it reads), or blocks still in a WAL
        # Used blocks, not total_blocks: DuckDB cuts free blocks off the end of the file but still
        # counts them. A file shorter than its used blocks must lack one of them.
        expected = _HEADER_BYTES + int(row[0]) * int(row[1])
        size = self.path.stat().st_size
        if size < expected:
            raise StoreDamagedError(
                f"store {self.path} is damaged (cut short: {size} of {expected} bytes); restore "
                "it from a backup, or move it aside and rebuild it with `tlxdb import` of your "
                "runs' output folders"
            )

    @contextmanager
    def _attached(
        self, write: bool, sandbox: Sandbox | None
    ) -> Iterator[duckdb.DuckDBPyConnection]:
        if sandbox is not None:
            with (
                self._mutex,
                self._lock(write=False),
                self._sandboxed(sandbox) as con,
            ):
                yield con
            return
        with self._mutex, self._lock(write):
            if self._instance is None:
                self._instance = self._new_instance()
            con = self._instance
            self._open(con, write)
            try:
                yield con
            finally:
                try:
                    self._close(con, write)
                except duckdb.Error:
                    con.close()  # never reuse an instance in doubt
                    self._instance = None

    def _lock(self, write: bool) -> AbstractContextManager[None]:
        """The store's lock for one call: exclusive to write, shared to read."""
        return store_lock(self.path, exclusive=write, timeout_s=self.lock_timeout_s)

    def _open(self, con: duckdb.DuckDBPyConnection, write: bool) -> None:
        """Under the lock: make the store `tlxstore` in `con`, read-only unless `write`."""
        self._attach(con, write)

    def _close(self, con: duckdb.DuckDBPyConnection, write: bool) -> None:
        """Under the lock, at the end of a call: detach the store and drop what the call left."""
        con.execute("USE memory")
        con.execute(f"DETACH DATABASE IF EXISTS {ALIAS}")
        drop_temporaries(con, write)

    def _done_writing(self, con: duckdb.DuckDBPyConnection) -> None:
        """Inside a write call whose writing is done, before it reads on (Store._reading):
        let go of the store as written, so it can be attached read-only."""
        con.execute("USE memory")
        con.execute(f"DETACH {ALIAS}")

    def _read_only_again(self, con: duckdb.DuckDBPyConnection) -> None:
        """After _done_writing: the store in `con` again, read-only."""
        self._attach(con, write=False)

    @contextmanager
    def _sandboxed(self, sandbox: Sandbox) -> Iterator[duckdb.DuckDBPyConnection]:
        """A DuckDB instance of its own with the store attached read-only, fenced as the module
        says, closed after the block. The caller holds the store lock."""
        con = self._new_instance()  # a backend loads its own extensions here, before the fence
        # DuckDB's temp folder stays reachable behind the fence; the default one (./.tmp, where
        # tlxdb was started) may be anything, a symlink to /etc included. This one is private.
        spill = tempfile.mkdtemp(prefix="tlxdb-query-")
        try:
            con.execute(f"SET temp_directory = '{sql_quoted(spill)}'")
            con.execute("SET autoinstall_known_extensions = false")
            con.execute("SET autoload_known_extensions = false")
            self._attach(con, write=False)
            if not sandbox.allow_files:  # an attached DuckLake still reads its own data files
                own = self._data_directories()
                if own:
                    listed = ", ".join(f"'{sql_quoted(d)}'" for d in own)
                    con.execute(f"SET allowed_directories = [{listed}]")
                con.execute("SET enable_external_access = false")
            con.execute("SET lock_configuration = true")
            yield con
        finally:
            con.close()
            shutil.rmtree(spill, ignore_errors=True)

    def _data_directories(self) -> list[str]:
        """Folders (or object-store prefixes) of the store's own data files beside the attached
        database, which a sandboxed query still reads."""
        return []

    def _new_instance(self) -> duckdb.DuckDBPyConnection:
        """The in-memory DuckDB instance the store is attached to (a backend may load extensions).

        Checkpoint policy: every COMMIT checkpoints (a WAL threshold of 0), and DETACH does not.
        A batch larger than DuckDB's skip-WAL estimate is then written straight into the file at
        COMMIT instead of into the WAL and again at DETACH; a small one goes through the WAL and
        is checkpointed at once. Either way no WAL outlives a call, so an ATTACH (a reader's, or
        the next writer's) never replays one: replaying a WAL costs more than it saves (measured
        in docs/STORE.md). A WAL left by a killed writer is replayed by the next ATTACH and
        checkpointed by the next COMMIT.

        Merging policy: a checkpoint may also merge a table's small row groups into full ones
        (DuckDB's vacuum), rewriting rows it wrote before. Left to itself DuckDB does that at
        every checkpoint, so batch after batch the growing last row group was rewritten again
        (COMMIT of a 10k-event batch 40-50 ms without merging, 80-550 ms with). Merging is on
        only for the COMMIT of a projection pass that is due (projection.merge_if_due: a bulk
        pass, or every COMPACT_EVERY-th): a table holds at most that many small row groups past
        its last full one, and a row is rewritten about once."""
        con = duckdb.connect()
        con.execute(store_sql("macros"))
        con.execute("PRAGMA disable_checkpoint_on_shutdown")
        con.execute("SET wal_autocheckpoint = '0KB'")
        # A store created here uses this DuckDB's storage format (an existing one keeps its own):
        # its checkpoints cost half to two thirds of the default (v1.0) format's. A DuckDB that
        # does not know 'latest' keeps its default.
        with suppress(duckdb.Error):
            con.execute("SET storage_compatibility_version = 'latest'")
        return con

    def _schema_sql(self) -> str:
        """The statements that create the store's tables in this backend."""
        return store_sql("schema")

    def _attach_statement(self, write: bool) -> str:
        """How this backend attaches the store as `tlxstore`."""
        mode = "" if write else " (READ_ONLY)"
        return f"ATTACH '{sql_quoted(self.path)}' AS {ALIAS}{mode}"

    def _attach(self, con: duckdb.DuckDBPyConnection, write: bool) -> None:
        deadline = time.monotonic() + self.lock_timeout_s
        delay = 0.005
        while True:
            try:
                con.execute(self._attach_statement(write))
                con.execute(f"USE {ALIAS}")
                return
            except duckdb.IOException as exc:
                damage = self.damage(exc)  # before anything else: "block" holds "lock"
                if damage is not None:
                    raise damage from None
                text = str(exc).lower()
                held = any(sign in text for sign in _HELD_SIGNS)
                if held and time.monotonic() < deadline:
                    time.sleep(
                        delay
                    )  # held by a program outside tlxdb's lock (e.g. a duckdb shell)
                    delay = min(delay * 2, 0.2)
                    continue
                if held:
                    raise StoreBusyError(
                        f"store {self.location} is held by another program (not tlxdb) for {self.lock_timeout_s:g} s; close it and retry"
                    ) from None
                if any(
                    reason in text
                    for reason in ("permission denied", "read-only file system", "not permitted")
                ):
                    raise StoreError(
                        f"store {self.location} is not writable; make it writable or choose another store"
                    ) from None
                if "newer" in text or ("version" in text and "storage" in text):
                    raise StoreTooNewError(
                        f"store {self.location} was written by a newer DuckDB than {duckdb.__version__}; upgrade tlxdb"
                    ) from None
                if "not a valid DuckDB database file" in str(exc):
                    raise StoreError(
                        f"store {self.location} cannot be opened: it is not a DuckDB file (damaged, or "
                        "another program's); move it aside or choose another store"
                    ) from None
                raise (
                    self.damage(exc)
                    or disk_full(exc, f"store {self.location}")
                    or StoreError(f"store {self.location} cannot be opened: {one_line(exc)}")
                ) from None
            except duckdb.Error as exc:
                raise self.damage(exc) or StoreError(
                    f"store {self.location} cannot be opened: {one_line(exc)}"
                ) from None


def drop_temporaries(con: duckdb.DuckDBPyConnection, write: bool) -> None:
    """Drop the temporary tables and views a call made, and its registered batch (asking for
    the temp catalog's alone: listing every catalog's would read a DuckLake's from its server)."""
    for kind, name in (
        []
        if not write
        else con.execute(  # only writes leave temp objects
            "SELECT 'TABLE', table_name FROM duckdb_tables() WHERE database_name = 'temp' "
            "UNION ALL SELECT 'VIEW', view_name FROM duckdb_views() "
            "WHERE database_name = 'temp' AND NOT internal"
        ).fetchall()
    ):
        con.execute(f'DROP {kind} IF EXISTS temp."{name}"')
    con.unregister("incoming")
