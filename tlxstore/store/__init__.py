"""The shared evidence store: a DuckDB file that is the union of run logs.

One class, `Store`, in front of its parts: `connection` (the DuckDB instance, the lock, attaching
the file; a backend overrides its hooks), `schema` (creating, version check, upgrade), `ingest`
(the batch as an Arrow table, the checks, the append), `projection` (projection passes and the
merging policy), `generation` (the counter every write bumps) and `reading` (the read-only check,
rows back into envelopes); `sql` loads the statements in tlxstore/sql/.

Invariants:
- Ingest is idempotent by event_id: the same id with the same body is a no-op; the same id with
  another body raises EventConflictError; another event at a (run, seq) already taken raises
  SequenceConflictError. Per-run sequence numbers in the store are dense from 0.
- One ingest is one DuckDB transaction: its events appear together or not at all (a writer
  killed mid-ingest leaves nothing of that batch).
- The proj_* tables hold the projections of exactly the events below
  projection_state.projected_pos. A projection pass (project.sql, one INSERT per table over every
  event not yet projected, never row by row) commits with the advance of projected_pos. A batch
  of fewer than PROJECT_INLINE_BELOW events is projected in its ingest's own transaction; a
  larger one is left to the next pass, which every read of the projections runs first
  (Store._reading) and `Store.project` runs on demand. No reader ever sees a projection behind
  the events.
- A batch enters as one Arrow table of records (payload as JSON text, serialized once per event).
- A call leaves no WAL behind: COMMIT checkpoints (see connection.Connections._new_instance).
- Every call attaches the file only while holding `<store>.lock` (exclusive to write, shared to
  read) and detaches it before releasing, so several tlxdb processes share one file and no
  DuckDB lock error reaches a user; a store stuck locked past the timeout raises StoreBusyError.
- A store written by a newer tlxdb (higher store schema version) is refused.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa

from tlxstore.errors import QueryError, QueryFenceError, StoreError, UnknownRunError
from tlxstore.store import generation, projection, reading, schema, views
from tlxstore.store.connection import Connections, Sandbox
from tlxstore.store.ingest import IngestTimings, append_new, incoming_table
from tlxstore.store.sql import arrow, one_line, store_sql

if TYPE_CHECKING:  # the codec (every event model) is imported where events are read or written:
    from tlxstore.events import Envelope  # a query alone (`tlxdb runs`) never needs it


class Store(Connections):
    """One DuckDB evidence store file, shared by every tlxdb process on the host."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        create: bool = True,
        lock_timeout_s: float | None = None,
    ) -> None:
        """Open the store at `path`, creating it when missing (unless create=False)."""
        super().__init__(path, lock_timeout_s)
        self.last_ingest: IngestTimings | None = None
        self._v1_read_only = False  # a v1 store that could not be upgraded (every event projected)
        self._projected_at: int | None = None  # a generation at which no projection lagged
        if not self.exists():
            if not create:
                raise StoreError(f"no store at {self.location}")
            with self._connect(write=True) as con:
                schema.create(con, self.location, self._schema_sql())
        with self._connect(write=False) as con:
            self._check_intact(con)
            version = schema.stored_version(con, self.location)
        if version < schema.STORE_SCHEMA_VERSION:
            self._upgrade(version)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.location!r})"

    def _upgrade(self, version: int) -> None:
        """Bring an older store to the current schema (schema.upgrade). A store that is not
        writable stays as it is and is read as it is (a v1 one: every event projected)."""
        with ExitStack() as stack:
            try:
                con = stack.enter_context(self._connect(write=True))
            except StoreError:
                self._v1_read_only = version == 1
                return
            schema.upgrade(con)

    def check_writable(self) -> None:
        """Raise StoreError unless this process can write the store (before a run does work)."""
        with self._connect(write=True):
            pass

    @property
    def schema_version(self) -> int:
        return schema.STORE_SCHEMA_VERSION

    # ---- writing ------------------------------------------------------------------------
    def ingest(self, envelopes: Iterable[Envelope]) -> int:
        """Add events not yet stored (idempotent by event_id); returns how many rows were added.
        Where the time went is left in `last_ingest` (when it returns)."""
        envs = list(envelopes)
        if not envs:
            return 0
        from tlxstore import codec

        t0 = time.perf_counter()
        with codec.gc_paused():
            incoming = incoming_table(envs)
        t1 = time.perf_counter()
        with self._connect(write=True) as con:
            t2 = time.perf_counter()
            con.execute("BEGIN")
            try:
                added = append_new(con, incoming)
                t3 = time.perf_counter()
                projected = 0
                if added and len(envs) < projection.PROJECT_INLINE_BELOW:
                    projected = projection.project_pending(con)
                t3p = time.perf_counter()
                projection.merge_if_due(con, projected)
                if added:  # before COMMIT, under the exclusive lock: no reader ever finds new
                    self._bump_generation()  # rows under an old generation (a
                con.execute("COMMIT")  # failed COMMIT leaves a bump too many: one refresh)
            except BaseException:
                con.execute("ROLLBACK")
                raise
            t4 = time.perf_counter()
        t5 = time.perf_counter()
        self.last_ingest = IngestTimings(
            events=len(envs),
            added=added,
            table_ms=(t1 - t0) * 1e3,
            lock_attach_ms=(t2 - t1) * 1e3,
            sql_ms=(t3 - t2) * 1e3,
            project_ms=(t3p - t3) * 1e3,
            commit_ms=(t4 - t3p) * 1e3,
            release_ms=(t5 - t4) * 1e3,
        )
        return added

    def ingest_log(self, path: str | os.PathLike[str]) -> int:
        """Ingest a run log (a file, or an output folder holding events.jsonl)."""
        from tlxstore.runlog import read_envelopes

        return self.ingest(read_envelopes(path))

    def generation(self) -> int:
        """A number that changes whenever the store's content changes (0 before any write).
        Cheap (one small read, no lock): a replica compares it to decide whether to refresh."""
        return generation.read_generation(self.path)

    def _bump_generation(self) -> None:
        """Move the generation on; under the exclusive lock, before the COMMIT of new rows."""
        generation.bump_generation(self.path)

    # ---- projections --------------------------------------------------------------------
    def project(self) -> int:
        """Bring the proj_* tables up to date with every event stored; returns how many events
        were projected (0 when none was behind). Readers call it as needed (Store._reading);
        `tlxdb import` calls it once after its ingests."""
        if self._v1_read_only:
            return 0
        with self._connect(write=True) as con:
            return projection.catch_up(con)

    def projection_lag(self) -> int:
        """How many stored events the proj_* tables do not hold yet."""
        if self._v1_read_only:
            return 0
        with self._connect(write=False) as con:
            return projection.lag(con)

    @contextmanager
    def _reading(self, sandbox: Sandbox | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-only session whose projections hold every stored event: when some are behind,
        they are projected first under the exclusive lock, and the read runs under that lock
        (the store attached read-only again), so no write can come between. With a sandbox the
        session is a fenced instance of its own (connection.Sandbox)."""
        with self._connect(write=False, sandbox=sandbox) as con:
            # Under the shared lock the generation cannot move; no ingest since a generation
            # seen without lag means none now (a pass only ever lowers the lag).
            seen = self.generation()
            lag = 0 if self._v1_read_only or seen == self._projected_at else projection.lag(con)
            if not lag:
                self._projected_at = seen
                yield con
                return
        with ExitStack() as stack:
            try:
                con = stack.enter_context(self._connect(write=True))
            except StoreError as exc:
                raise StoreError(
                    f"{lag} events of store {self.location} are not in its views yet, and they cannot be "
                    f"brought up to date: {exc}"
                ) from None
            projection.catch_up(con)
            self._done_writing(con)
            if sandbox is None:
                self._read_only_again(con)
            else:
                con = stack.enter_context(self._sandboxed(sandbox))
            self._projected_at = self.generation()
            yield con

    # ---- stored views -------------------------------------------------------------------
    def define_views(self, definitions: Sequence[tuple[str, str]], digest: str) -> bool:
        """Store `definitions` (name, SELECT; each after those it reads) as the file's views,
        unless it already holds the set named `digest`; returns whether they were replaced.
        A store that cannot be written keeps the views it has (tlxdb's queries define their
        own on every call). Replacing them does not change what any query answers, so the
        store's generation stays as it is."""
        if self._v1_read_only:
            return False
        with self._connect(write=False) as con:
            if views.stored_digest(con) == digest:
                return False
        with ExitStack() as stack:
            try:
                con = stack.enter_context(self._connect(write=True))
            except StoreError:
                return False
            if views.stored_digest(con) == digest:
                return False  # another process did it while we waited for the lock
            try:
                views.replace_all(con, definitions, digest)
            except duckdb.Error as exc:
                raise StoreError(
                    f"the views of store {self.location} cannot be stored: {one_line(exc)}"
                ) from None
        return True

    # ---- reading ------------------------------------------------------------------------
    def query(
        self,
        sql: str,
        params: Mapping[str, Any] | Sequence[Any] | None = None,
        views: Mapping[str, str] | None = None,
        *,
        sandbox: Sandbox | None = None,
    ) -> pa.Table:
        """Run one read-only SELECT; `views` (name -> SELECT) are defined as temporary views first.
        SQL a user typed runs in a `sandbox` (connection.Sandbox)."""
        with self._reading(sandbox) as con:
            reading.check_read_only(con, sql)
            try:
                for name, body in (views or {}).items():
                    con.execute(f'CREATE TEMPORARY VIEW "{name}" AS {body}')
                try:
                    return arrow(con.execute(sql, params))
                finally:
                    for name in views or {}:
                        con.execute(f'DROP VIEW IF EXISTS temp."{name}"')
            except duckdb.PermissionException as exc:
                raise QueryFenceError(
                    f"the query reached outside the store: {one_line(exc)}"
                ) from None
            except duckdb.Error as exc:
                raise self.damage(exc) or QueryError(f"the query failed: {one_line(exc)}") from None

    def query_many(
        self,
        statements: Sequence[tuple[str, Mapping[str, Any] | Sequence[Any] | None]],
        views: Mapping[str, str] | None = None,
    ) -> list[pa.Table]:
        """Several read-only SELECTs in one visit to the store (one attach: the later ones find
        the table metadata warm). Each is checked as `query` checks one; `views` are defined
        once, as temporary views, for all of them."""
        with self._reading() as con:
            out = []
            try:
                for name, body in (views or {}).items():
                    con.execute(f'CREATE TEMPORARY VIEW "{name}" AS {body}')
                for sql, params in statements:
                    reading.check_read_only(con, sql)
                    out.append(arrow(con.execute(sql, params)))
            except duckdb.Error as exc:
                raise self.damage(exc) or QueryError(f"the query failed: {one_line(exc)}") from None
            finally:
                for name in views or {}:
                    con.execute(f'DROP VIEW IF EXISTS temp."{name}"')
            return out

    def run_envelopes(self, run_id: str) -> list[Envelope]:
        """Every stored event of one run, in seq order (upcast to the current versions)."""
        with self._connect(write=False) as con:
            rows = con.execute(store_sql("run_envelopes"), {"run_id": run_id}).fetchall()
        return reading.envelopes(rows)

    def run_ids(self) -> list[str]:
        """Every run id in the store, oldest first."""
        with self._connect(write=False) as con:
            return [
                r[0] for r in con.execute("SELECT run_id FROM run_heads ORDER BY run_id").fetchall()
            ]

    def event_count(self) -> int:
        with self._connect(write=False) as con:
            row = con.execute("SELECT count(*) FROM events").fetchone()
        return int(row[0]) if row else 0

    def resolve_run(self, ref: str | os.PathLike[str]) -> str:
        """A run id from a run id, a unique run-id prefix, or an output folder (ingested first)."""
        p = Path(ref)
        if p.is_dir() or (p.is_file() and p.suffix == ".jsonl"):
            from tlxstore.runlog import log_path, read_envelopes

            envs = read_envelopes(log_path(p))
            if not envs:
                raise UnknownRunError(f"the run log at {log_path(p)} holds no events")
            self.ingest(envs)
            return envs[0].run_id
        ref = str(ref)
        with self._connect(write=False) as con:
            matches = [
                r[0]
                for r in con.execute(
                    "SELECT run_id FROM run_heads WHERE starts_with(run_id, ?) ORDER BY run_id",
                    [ref],
                ).fetchall()
            ]
        if ref in matches:
            return ref
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise UnknownRunError(
                f"no run {ref!r} in store {self.location}; list runs with `tlxdb runs`"
            )
        raise UnknownRunError(
            f"run {ref!r} is ambiguous in store {self.location}: {', '.join(matches[:5])}"
        )
