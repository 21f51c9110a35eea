"""How a Store reaches its file: one in-memory DuckDB instance per Store, kept for its lifetime;
each call ATTACHes the store file (read-only or read-write) under the store lock
(`tlxstore/locking.py`) and DETACHes it before releasing: a few ms, where opening a new DuckDB
instance per call costs tens. A backend (tlxstore/ducklake.py) overrides the three hooks:
`_new_instance`, `_attach_statement` and `_schema_sql`."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Self

import duckdb

from tlxstore.config import settings
from tlxstore.errors import StoreBusyError, StoreError, StoreTooNewError
from tlxstore.locking import store_lock
from tlxstore.store.sql import ALIAS, one_line, sql_quoted, store_sql


class Connections:
    """The store file at `path`, attached to this object's own DuckDB instance call by call."""

    def __init__(self, path: str | os.PathLike[str], lock_timeout_s: float | None) -> None:
        self.path = Path(path).expanduser().absolute()
        self.lock_timeout_s = (
            lock_timeout_s if lock_timeout_s is not None else settings().lock_timeout_s
        )
        self._mutex = threading.RLock()
        self._instance: duckdb.DuckDBPyConnection | None = None

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
    def _connect(self, write: bool) -> Iterator[duckdb.DuckDBPyConnection]:
        with self._mutex, store_lock(self.path, exclusive=write, timeout_s=self.lock_timeout_s):
            if self._instance is None:
                self._instance = self._new_instance()
            con = self._instance
            self._attach(con, write)
            try:
                yield con
            finally:
                try:
                    con.execute("USE memory")
                    con.execute(f"DETACH {ALIAS}")
                    for kind, name in (
                        []
                        if not write
                        else con.execute(  # only writes leave temp objects
                            "SELECT 'TABLE', table_name FROM duckdb_tables() WHERE temporary "
                            "UNION ALL SELECT 'VIEW', view_name FROM duckdb_views() WHERE temporary AND NOT internal"
                        ).fetchall()
                    ):
                        con.execute(f'DROP {kind} IF EXISTS temp."{name}"')
                    con.unregister("incoming")
                except duckdb.Error:
                    con.close()  # never reuse an instance in doubt
                    self._instance = None

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
                text = str(exc).lower()
                if "lock" in text and time.monotonic() < deadline:
                    time.sleep(
                        delay
                    )  # held by a program outside tlxdb's lock (e.g. a duckdb shell)
                    delay = min(delay * 2, 0.2)
                    continue
                if "lock" in text:
                    raise StoreBusyError(
                        f"store {self.path} is held by another program (not tlxdb) for {self.lock_timeout_s:g} s; close it and retry"
                    ) from None
                if any(
                    reason in text
                    for reason in ("permission denied", "read-only file system", "not permitted")
                ):
                    raise StoreError(f"store {self.path} is not writable") from None
                if "newer" in text or ("version" in text and "storage" in text):
                    raise StoreTooNewError(
                        f"store {self.path} was written by a newer DuckDB than {duckdb.__version__}; upgrade tlxdb"
                    ) from None
                raise StoreError(f"store {self.path} cannot be opened: {one_line(exc)}") from None
            except duckdb.Error as exc:
                raise StoreError(f"store {self.path} cannot be opened: {one_line(exc)}") from None
