"""The shared evidence store: a DuckDB file that is the union of run logs.

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
- A call leaves no WAL behind: COMMIT checkpoints (see Store._new_instance).
- Every call attaches the file only while holding `<store>.lock` (exclusive to write, shared to
  read) and detaches it before releasing, so several tlxdb processes share one file and no
  DuckDB lock error reaches a user; a store stuck locked past the timeout raises StoreBusyError.
- A store written by a newer tlxdb (higher store schema version) is refused.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from tlxstore import codec
from tlxstore.config import settings
from tlxstore.errors import (
    EventConflictError,
    QueryError,
    ReadOnlyQueryError,
    SequenceConflictError,
    StoreBusyError,
    StoreError,
    StoreTooNewError,
    UnknownRunError,
)
from tlxstore.events import Envelope
from tlxstore.locking import store_lock
from tlxstore.runlog import log_path, read_envelopes

STORE_SCHEMA_VERSION = 2  # 2: events.pos and projection_state (a v1 store is upgraded on open)
ALIAS = "tlxstore"  # the store file's name inside a connection
COMPACT_EVERY = 8  # every 8th projection pass merges small row groups (Store._merge_if_due)
# A batch this small is projected in its ingest's transaction (the loop's per-candidate ingests,
# which a lookup follows at once); a larger one is projected by the next read, in bulk, where a
# pass's fixed cost per table is spread over every batch since the last (docs/STORE.md).
PROJECT_INLINE_BELOW = 1_000
PROJECT_CHUNK = 1_000_000  # events per transaction of a projection pass that catches up
_VACUUM_TASKS = 100  # DuckDB's default max_vacuum_tasks: the merges one compaction may run
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@cache
def store_sql(name: str) -> str:
    """A statement of the store itself, from tlxstore/sql/<name>.sql."""
    return resources.files("tlxstore").joinpath("sql", f"{name}.sql").read_text()


def _record(row: dict[str, Any]) -> Envelope:
    return codec.decode(
        {**row, "recorded_at": _EPOCH + timedelta(microseconds=row["recorded_at_us"])}
    )


def _arrow(result: duckdb.DuckDBPyConnection) -> pa.Table:
    to_table = getattr(result, "to_arrow_table", None) or result.fetch_arrow_table
    return to_table()


@cache
def _projection_statements() -> tuple[tuple[str, str], ...]:
    """project.sql, statement by statement, each with the one event type it projects (the
    `FROM unprojected WHERE type = '...'` it reads)."""
    out = []
    for statement in duckdb.extract_statements(store_sql("project")):
        types = set(re.findall(r"FROM unprojected WHERE type = '(\w+)'", statement.query))
        if len(types) != 1:
            raise StoreError("each projection in project.sql reads one event type")
        out.append((types.pop(), statement.query))
    return tuple(out)


@cache
def _append_statements() -> tuple[str, ...]:
    return tuple(st.query for st in duckdb.extract_statements(store_sql("ingest_append")))


def sql_quoted(path: Path | str) -> str:
    """A path as the inside of a single-quoted SQL string literal."""
    return str(path).replace("'", "''")


def _one_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


_TS = pa.timestamp("us", tz="UTC")
_INCOMING = pa.schema(
    [
        ("event_id", pa.string()),
        ("run_id", pa.string()),
        ("seq", pa.int64()),
        ("recorded_at", _TS),
        ("type", pa.string()),
        ("schema_version", pa.int32()),
        ("payload", pa.string()),
    ]
)


def incoming_table(envs: Sequence[Envelope]) -> pa.Table:
    """A batch as one Arrow table of records (payload as JSON text, per codec.payload_bytes: the
    bytes pydantic writes, without `type`). One pass over the envelopes gathers every column
    (each envelope is touched once: a 100k-event batch read from a log, its objects spread over
    memory, took 4.5-6.9 us an event with one pass per column, 3.1-3.4 with one in all), with
    one pydantic serialization per event and no other per-field Python work; the projections
    (benchmark samples included) are computed from the payloads in SQL. An event given twice is
    kept once; the same id with two bodies raises EventConflictError."""
    if len({env.event_id for env in envs}) != len(envs):
        envs = _distinct(envs)
    ids, runs, seqs, times, types, versions, payloads = [], [], [], [], [], [], []
    payload = codec.payload_bytes
    for env in envs:
        event = env.event
        ids.append(env.event_id)
        runs.append(env.run_id)
        seqs.append(env.seq)
        times.append(env.recorded_at)
        types.append(event.type)
        versions.append(event.SCHEMA_VERSION)
        payloads.append(payload(event))
    return pa.table(
        [
            pa.array(ids, pa.string()),
            pa.array(runs, pa.string()),
            pa.array(seqs, pa.int64()),
            pa.array(times, _TS),
            pa.array(types, pa.string()),
            pa.array(versions, pa.int32()),
            pa.array(payloads, pa.string()),
        ],
        schema=_INCOMING,
    )


def _distinct(envs: Sequence[Envelope]) -> list[Envelope]:
    """The batch with each event id once (the first); the same id with two bodies is refused."""
    first: dict[str, Envelope] = {}
    for env in envs:
        seen = first.setdefault(env.event_id, env)
        if seen is not env and (
            seen.run_id,
            seen.seq,
            seen.recorded_at,
            codec.payload_bytes(seen.event),
        ) != (env.run_id, env.seq, env.recorded_at, codec.payload_bytes(env.event)):
            raise EventConflictError(
                f"event {env.event_id} appears twice in one batch with different bodies"
            )
    return list(first.values())


@dataclass(frozen=True)
class IngestTimings:
    """Where the time of one Store.ingest went, in ms: the Arrow table built in Python; waiting
    for the lock and attaching; the checks and the append of the events (SQL); the projection
    pass run in the same transaction (0 when the batch is left to the next read); COMMIT, whose
    checkpoint writes the batch into the file (after the generation bump); detach and unlock."""

    events: int
    added: int
    table_ms: float
    lock_attach_ms: float
    sql_ms: float
    project_ms: float
    commit_ms: float
    release_ms: float

    @property
    def total_ms(self) -> float:
        return (
            self.table_ms
            + self.lock_attach_ms
            + self.sql_ms
            + self.project_ms
            + self.commit_ms
            + self.release_ms
        )


# --------------------------------------------------------------------------------------------


class Store:
    """One DuckDB evidence store file, shared by every tlxdb process on the host."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        create: bool = True,
        lock_timeout_s: float | None = None,
    ) -> None:
        """Open the store at `path`, creating it when missing (unless create=False)."""
        self.path = Path(path).expanduser().absolute()
        self.last_ingest: IngestTimings | None = None
        self._v1_read_only = False  # a v1 store that could not be upgraded (every event projected)
        self._projected_at: int | None = None  # a generation at which no projection lagged
        self._mutex = threading.RLock()
        self._instance: duckdb.DuckDBPyConnection | None = None
        self.lock_timeout_s = (
            lock_timeout_s if lock_timeout_s is not None else settings().lock_timeout_s
        )
        if self.path.is_dir():
            raise StoreError(
                f"store path {self.path} is a folder; give a file such as {self.path / 'store.duckdb'}"
            )
        if not self.path.exists():
            if not create:
                raise StoreError(f"no store at {self.path}")
            self._create()
        if self._check_version() < STORE_SCHEMA_VERSION:
            self._upgrade()

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

    # ---- connections --------------------------------------------------------------------
    # One in-memory DuckDB instance per Store, kept for its lifetime; each call ATTACHes the
    # store file (read-only or read-write) under the store lock and DETACHes it before releasing:
    # a few ms, where opening a new DuckDB instance per call costs tens.

    def close(self) -> None:
        """Drop this Store's in-memory DuckDB instance (it is recreated on the next call)."""
        with self._mutex:
            if self._instance is not None:
                self._instance.close()
                self._instance = None

    def __enter__(self) -> Store:
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
        only for the COMMIT of a projection pass that is due (_merge_if_due: a bulk pass, or
        every COMPACT_EVERY-th): a table holds at most that many small row groups past its last
        full one, and a row is rewritten about once."""
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
                raise StoreError(f"store {self.path} cannot be opened: {_one_line(exc)}") from None
            except duckdb.Error as exc:
                raise StoreError(f"store {self.path} cannot be opened: {_one_line(exc)}") from None

    def _create(self) -> None:
        with self._connect(write=True) as con:
            tables = {
                r[0]
                for r in con.execute(
                    f"SELECT table_name FROM duckdb_tables() WHERE database_name = '{ALIAS}'"
                ).fetchall()
            }
            if "tlxdb_meta" in tables:
                return  # another process created it while we waited for the lock
            if tables:
                raise StoreError(f"{self.path} is a DuckDB file but not a tlxdb store")
            con.execute("BEGIN")
            con.execute(self._schema_sql())
            con.execute(
                "INSERT INTO tlxdb_meta VALUES ('store_schema_version', ?), ('created_at', ?)",
                [str(STORE_SCHEMA_VERSION), datetime.now(UTC).isoformat()],
            )
            con.execute("COMMIT")

    def _check_version(self) -> int:
        """The store file's schema version; refuses a file that is not a store or is too new."""
        with self._connect(write=False) as con:
            try:
                row = con.execute(
                    "SELECT value FROM tlxdb_meta WHERE key = 'store_schema_version'"
                ).fetchone()
            except duckdb.CatalogException:
                raise StoreError(f"{self.path} is a DuckDB file but not a tlxdb store") from None
        if row is None:
            raise StoreError(f"{self.path} has no store schema version; it is not a tlxdb store")
        version = int(row[0])
        if version > STORE_SCHEMA_VERSION:
            raise StoreTooNewError(
                f"store {self.path} has schema v{version}, written by a newer tlxdb (this one reads up to "
                f"v{STORE_SCHEMA_VERSION}); upgrade tlxdb"
            )
        return version

    def _upgrade(self) -> None:
        """Bring a v1 store to v2 in one transaction: events gains `pos` (NULL for the events it
        holds, which v1 projected as they came) and projection_state starts with all of them
        projected. A store that is not writable stays v1 and is read as it is (all projected)."""
        with ExitStack() as stack:
            try:
                con = stack.enter_context(self._connect(write=True))
            except StoreError:
                self._v1_read_only = True
                return
            row = con.execute(
                "SELECT value FROM tlxdb_meta WHERE key = 'store_schema_version'"
            ).fetchone()
            if row is None or int(row[0]) != 1:
                return  # upgraded by another process meanwhile
            con.execute("BEGIN")
            con.execute(store_sql("upgrade_v2"))
            con.execute("COMMIT")

    @property
    def schema_version(self) -> int:
        return STORE_SCHEMA_VERSION

    # ---- writing ------------------------------------------------------------------------
    def ingest(self, envelopes: Iterable[Envelope]) -> int:
        """Add events not yet stored (idempotent by event_id); returns how many rows were added.
        Where the time went is left in `last_ingest` (when it returns)."""
        envs = list(envelopes)
        if not envs:
            return 0
        t0 = time.perf_counter()
        with codec.gc_paused():
            incoming = incoming_table(envs)
        t1 = time.perf_counter()
        with self._connect(write=True) as con:
            t2 = time.perf_counter()
            con.execute("BEGIN")
            try:
                added = self._ingest_locked(con, incoming)
                t3 = time.perf_counter()
                projected = 0
                if added and len(envs) < PROJECT_INLINE_BELOW:
                    projected = self._project_pending(con)
                t3p = time.perf_counter()
                self._merge_if_due(con, projected)
                if added:  # before COMMIT, under the exclusive lock: no reader ever finds new
                    self._bump_generation()  # rows under an old generation (a failed COMMIT
                con.execute("COMMIT")  # leaves a bump too many, which costs a refresh)
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

    @staticmethod
    def _merge_if_due(con: duckdb.DuckDBPyConnection, projected: int) -> None:
        """Set whether this transaction's COMMIT merges small row groups (of every table): only
        with a projection pass, and then if the pass covered a bulk of events (PROJECT_INLINE_BELOW or
        more: it writes large row groups anyway, and the events it covers were appended in
        groups left for a pass to merge) or if it is the COMPACT_EVERY-th pass. A small ingest is
        its own pass, so its row groups are merged once every COMPACT_EVERY ingests."""
        due = False
        if projected:
            row = con.execute("SELECT catch_ups FROM projection_state").fetchone()
            due = projected >= PROJECT_INLINE_BELOW or (
                row is not None and row[0] % COMPACT_EVERY == 0
            )
        con.execute(f"SET max_vacuum_tasks = {_VACUUM_TASKS if due else 0}")

    # ---- generation: a counter every write bumps, for process-local replicas ------------
    @property
    def _generation_path(self) -> Path:
        return self.path.with_name(self.path.name + ".gen")

    def generation(self) -> int:
        """A number that changes whenever the store's content changes (0 before any write).
        Cheap (one small read, no lock): a replica compares it to decide whether to refresh."""
        try:
            return int(self._generation_path.read_bytes() or b"0")
        except (FileNotFoundError, ValueError):
            return 0

    def _bump_generation(self) -> None:
        fd = os.open(self._generation_path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            current = os.pread(fd, 32, 0)
            value = int(current or b"0") + 1 if current.strip().isdigit() else 1
            os.pwrite(fd, f"{value:020d}".encode(), 0)  # one small write: never seen half-done
        finally:
            os.close(fd)

    def ingest_log(self, path: str | os.PathLike[str]) -> int:
        """Ingest a run log (a file, or an output folder holding events.jsonl)."""
        return self.ingest(read_envelopes(path))

    # ---- projections --------------------------------------------------------------------
    def project(self) -> int:
        """Bring the proj_* tables up to date with every event stored; returns how many events
        were projected (0 when none was behind). Readers call it as needed (Store._reading);
        `tlxdb import` calls it once after its ingests."""
        if self._v1_read_only:
            return 0
        with self._connect(write=True) as con:
            return self._catch_up(con)

    def _catch_up(self, con: duckdb.DuckDBPyConnection) -> int:
        """Project every event behind, PROJECT_CHUNK events per transaction (a pass joins what
        the passes before it stored, so they run in pos order); under the exclusive lock."""
        done = 0
        while True:
            con.execute("BEGIN")
            try:
                n = self._project_pending(con, limit=PROJECT_CHUNK)
                self._merge_if_due(con, n)
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
            done += n
            if n < PROJECT_CHUNK:
                return done

    @staticmethod
    def _project_pending(con: duckdb.DuckDBPyConnection, limit: int | None = None) -> int:
        """Inside a transaction: project the events from projected_pos on (at most `limit`) and
        advance projected_pos past them; returns how many."""
        row = con.execute("SELECT next_pos, projected_pos FROM projection_state").fetchone()
        if row is None:
            raise StoreError("the store has no projection_state row; it is damaged")
        next_pos, lo = row
        hi = next_pos if limit is None else min(next_pos, lo + limit)
        if hi <= lo:
            return 0
        con.execute(store_sql("project_tail"), {"lo": lo, "hi": hi})
        types = {r[0] for r in con.execute("SELECT DISTINCT type FROM unprojected").fetchall()}
        for event_type, statement in _projection_statements():
            if event_type in types:  # no rows of a type, nothing to project
                con.execute(statement)
        con.execute(
            "UPDATE projection_state SET projected_pos = ?, catch_ups = catch_ups + 1", [hi]
        )
        con.execute("DROP TABLE unprojected")
        return hi - lo

    def projection_lag(self) -> int:
        """How many stored events the proj_* tables do not hold yet."""
        if self._v1_read_only:
            return 0
        with self._connect(write=False) as con:
            return self._lag(con)

    @staticmethod
    def _lag(con: duckdb.DuckDBPyConnection) -> int:
        row = con.execute("SELECT next_pos - projected_pos FROM projection_state").fetchone()
        return int(row[0]) if row else 0

    @contextmanager
    def _reading(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-only session whose projections hold every stored event: when some are behind,
        they are projected first under the exclusive lock, and the read runs under that lock
        (the store attached read-only again), so no write can come between."""
        with self._connect(write=False) as con:
            # Under the shared lock the generation cannot move; no ingest since a generation
            # seen without lag means none now (a pass only ever lowers the lag).
            generation = self.generation()
            lag = 0 if self._v1_read_only or generation == self._projected_at else self._lag(con)
            if not lag:
                self._projected_at = generation
                yield con
                return
        with ExitStack() as stack:
            try:
                con = stack.enter_context(self._connect(write=True))
            except StoreError as exc:
                raise StoreError(
                    f"{lag} events of store {self.path} are not in its views yet, and they cannot be "
                    f"brought up to date: {exc}"
                ) from None
            self._catch_up(con)
            con.execute("USE memory")
            con.execute(f"DETACH {ALIAS}")
            self._attach(con, write=False)
            self._projected_at = self.generation()
            yield con

    @staticmethod
    def _ingest_locked(con: duckdb.DuckDBPyConnection, incoming: pa.Table) -> int:
        """Check the batch against the store and append its new events (not their projections)."""
        con.register("incoming", incoming)
        con.execute("CREATE OR REPLACE TEMPORARY VIEW fresh AS SELECT * FROM incoming")
        runs = con.execute(store_sql("ingest_checks")).fetchall()
        behind = [run_id for run_id, lo, *_, next_seq in runs if lo < next_seq]
        if behind:  # some events may be stored already: keep only the ones that are not
            con.execute("DROP VIEW fresh")
            con.execute(store_sql("ingest_stage"), {"behind": behind})
            clashes = con.execute(store_sql("ingest_clashes")).fetchall()
            for run_id, seq, new_id, stored_id, stored, offered in clashes:
                if new_id != stored_id:
                    raise SequenceConflictError(
                        f"run {run_id} seq {seq} is already event {stored_id}, not {new_id}: two logs claim one run"
                    )
                # written by another tlxdb version? the same event once both are upcast
                if _record(stored) != _record(offered):
                    raise EventConflictError(
                        f"event {new_id} (run {run_id} seq {seq}) is already stored with a different body"
                    )
            con.execute(store_sql("ingest_fresh"))  # a copy without the events already stored
            runs = con.execute(store_sql("ingest_checks")).fetchall()
        return Store._append_fresh(con, runs)

    @staticmethod
    def _append_fresh(con: duckdb.DuckDBPyConnection, runs: list[tuple[Any, ...]]) -> int:
        """Check the sequence of the fresh events (`runs`: ingest_checks over them) and append
        them."""
        added = 0
        for run_id, lo, hi, n, distinct, next_seq in runs:
            if distinct != n:
                raise SequenceConflictError(
                    f"run {run_id}: one batch holds two events with the same seq"
                )
            if lo != next_seq:
                raise SequenceConflictError(
                    f"run {run_id}: event seq {lo} leaves a gap; the store expects seq {next_seq}"
                )
            if hi - lo + 1 != n:
                raise SequenceConflictError(
                    f"run {run_id}: the batch's seqs {lo}..{hi} have gaps ({n} events)"
                )
            added += n
        if added == 0:
            return 0
        reused = con.execute(store_sql("ingest_reused_ids")).fetchone()
        if reused is not None:
            raise EventConflictError(
                f"event id {reused[0]} is already stored as run {reused[1]} seq {reused[2]} with a different body"
            )
        for statement in _append_statements():
            con.execute(statement)
        return added

    # ---- reading ------------------------------------------------------------------------
    def query(
        self,
        sql: str,
        params: Mapping[str, Any] | Sequence[Any] | None = None,
        views: Mapping[str, str] | None = None,
    ) -> pa.Table:
        """Run one read-only SELECT; `views` (name -> SELECT) are defined as temporary views first."""
        with self._reading() as con:
            self._check_read_only(con, sql)
            try:
                for name, body in (views or {}).items():
                    con.execute(f'CREATE TEMPORARY VIEW "{name}" AS {body}')
                try:
                    return _arrow(con.execute(sql, params))
                finally:
                    for name in views or {}:
                        con.execute(f'DROP VIEW IF EXISTS temp."{name}"')
            except duckdb.Error as exc:
                raise QueryError(f"the query failed: {_one_line(exc)}") from None

    def query_many(
        self, statements: Sequence[tuple[str, Mapping[str, Any] | Sequence[Any] | None]]
    ) -> list[pa.Table]:
        """Several read-only SELECTs in one visit to the store (one attach: the later ones find
        the table metadata warm). Each is checked as `query` checks one."""
        with self._reading() as con:
            out = []
            for sql, params in statements:
                self._check_read_only(con, sql)
                try:
                    out.append(_arrow(con.execute(sql, params)))
                except duckdb.Error as exc:
                    raise QueryError(f"the query failed: {_one_line(exc)}") from None
            return out

    @staticmethod
    def _check_read_only(con: duckdb.DuckDBPyConnection, sql: str) -> None:
        try:
            statements = con.extract_statements(sql)
        except duckdb.Error as exc:
            raise QueryError(f"the query does not parse: {_one_line(exc)}") from None
        if len(statements) != 1:
            raise QueryError(f"give exactly one SQL statement, not {len(statements)}")
        kind = statements[0].type
        if kind not in (duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN):
            raise ReadOnlyQueryError(f"queries are read-only; a {kind.name} statement is refused")

    def run_envelopes(self, run_id: str) -> list[Envelope]:
        """Every stored event of one run, in seq order (upcast to the current versions)."""
        with self._connect(write=False) as con:
            rows = con.execute(store_sql("run_envelopes"), {"run_id": run_id}).fetchall()
        with codec.gc_paused():
            return codec.decode_many(
                [
                    {
                        "event_id": r[0],
                        "run_id": r[1],
                        "seq": r[2],
                        "recorded_at": _EPOCH + timedelta(microseconds=r[3]),
                        "type": r[4],
                        "schema_version": r[5],
                        "payload": r[6],
                    }
                    for r in rows
                ]
            )

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
                f"no run {ref!r} in store {self.path}; list runs with `tlxdb runs`"
            )
        raise UnknownRunError(
            f"run {ref!r} is ambiguous in store {self.path}: {', '.join(matches[:5])}"
        )
