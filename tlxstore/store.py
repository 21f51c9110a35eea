"""The shared evidence store: a DuckDB file that is the union of run logs.

Invariants:
- Ingest is idempotent by event_id: the same id with the same body is a no-op; the same id with
  another body raises EventConflictError; another event at a (run, seq) already taken raises
  SequenceConflictError. Per-run sequence numbers in the store are dense from 0.
- One ingest is one DuckDB transaction: its events and every projection row derived from them
  appear together or not at all (a writer killed mid-ingest leaves nothing of that batch).
- Rows are appended as Arrow tables, one INSERT per table per batch, never row by row.
- Every call opens DuckDB only while holding `<store>.lock` (exclusive to write, shared to read)
  and closes it before releasing, so several tlxdb processes share one file and no DuckDB lock
  error reaches a user; a store stuck locked past the timeout raises StoreBusyError.
- A store written by a newer tlxdb (higher store schema version) is refused.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
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
from tlxstore.events import (
    BenchmarkSampled,
    CandidateProposed,
    DecisionMade,
    Envelope,
    ExclusionRecorded,
    RunStarted,
    SourceStored,
)
from tlxstore.locking import store_lock
from tlxstore.runlog import log_path, read_envelopes

STORE_SCHEMA_VERSION = 1
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@cache
def store_sql(name: str) -> str:
    """A statement of the store itself, from tlxstore/sql/<name>.sql."""
    return resources.files("tlxstore").joinpath("sql", f"{name}.sql").read_text()


def _arrow(result: duckdb.DuckDBPyConnection) -> pa.Table:
    to_table = getattr(result, "to_arrow_table", None) or result.fetch_arrow_table
    return to_table()


def _one_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


# --------------------------------------------------------------------------------------------
# The rows one batch adds (Arrow schemas match tlxstore/sql/schema.sql)

_TS = pa.timestamp("us", tz="UTC")
_SCHEMAS: dict[str, pa.Schema] = {
    "events": pa.schema(
        [
            ("event_id", pa.string()),
            ("run_id", pa.string()),
            ("seq", pa.int64()),
            ("recorded_at", _TS),
            ("type", pa.string()),
            ("schema_version", pa.int32()),
            ("payload", pa.string()),
            ("body_digest", pa.string()),
        ]
    ),
    "proj_runs": pa.schema(
        [
            ("run_id", pa.string()),
            ("started_at", _TS),
            ("host", pa.string()),
            ("device_kind", pa.string()),
            ("backend", pa.string()),
            ("provider", pa.string()),
            ("model", pa.string()),
            ("kernel_path", pa.string()),
            ("kernel_sha256", pa.string()),
            ("bundle_digest", pa.string()),
            ("measurement_key", pa.string()),
            ("output_dir", pa.string()),
            ("label", pa.string()),
            ("triton_version", pa.string()),
            ("torch_version", pa.string()),
        ]
    ),
    "proj_candidates": pa.schema(
        [
            ("run_id", pa.string()),
            ("candidate_id", pa.string()),
            ("seq", pa.int64()),
            ("proposed_at", _TS),
            ("round", pa.int32()),
            ("parent_id", pa.string()),
            ("provider", pa.string()),
            ("hypothesis", pa.string()),
            ("hypothesis_kind", pa.string()),
            ("source_hash", pa.string()),
            ("normalized_hash", pa.string()),
            ("measurement_key", pa.string()),
            ("knobs", pa.string()),
        ]
    ),
    "proj_decisions": pa.schema(
        [
            ("run_id", pa.string()),
            ("candidate_id", pa.string()),
            ("seq", pa.int64()),
            ("decided_at", _TS),
            ("outcome", pa.string()),
            ("reason", pa.string()),
            ("speedup", pa.float64()),
            ("ci_low", pa.float64()),
            ("ci_high", pa.float64()),
            ("compared_to", pa.string()),
        ]
    ),
    "proj_samples": pa.schema(
        [
            ("run_id", pa.string()),
            ("candidate_id", pa.string()),
            ("case_id", pa.string()),
            ("phase", pa.string()),
            ("block", pa.int32()),
            ("sample_index", pa.int32()),
            ("sample_us", pa.float64()),
            ("event_seq", pa.int64()),
        ]
    ),
    "proj_sources": pa.schema(
        [
            ("source_hash", pa.string()),
            ("normalized_hash", pa.string()),
            ("text", pa.string()),
            ("size_bytes", pa.int64()),
        ]
    ),
    "proj_exclusions": pa.schema(
        [
            ("run_id", pa.string()),
            ("candidate_id", pa.string()),
            ("seq", pa.int64()),
            ("signature", pa.string()),
            ("outcome", pa.string()),
            ("reason", pa.string()),
            ("hypothesis", pa.string()),
            ("bundle_digest", pa.string()),
            ("device_kind", pa.string()),
        ]
    ),
}


@dataclass
class _Rows:
    """Column lists per table, filled event by event, turned into Arrow tables once."""

    columns: dict[str, dict[str, list[Any]]] = field(
        default_factory=lambda: {t: {c: [] for c in s.names} for t, s in _SCHEMAS.items()}
    )

    def add(self, table: str, **values: Any) -> None:
        cols = self.columns[table]
        for name in cols:
            cols[name].append(values.get(name))

    def table(self, name: str) -> pa.Table:
        return pa.table(self.columns[name], schema=_SCHEMAS[name])


@dataclass(frozen=True)
class _RunFacts:
    measurement_key: str | None
    bundle_digest: str | None
    device_kind: str | None


def _project(rows: _Rows, env: Envelope, facts: dict[str, _RunFacts]) -> None:
    """The projection rows of one event."""
    e = env.event
    run = facts.get(env.run_id, _RunFacts(None, None, None))
    match e:
        case RunStarted():
            rows.add(
                "proj_runs",
                run_id=env.run_id,
                started_at=env.recorded_at,
                host=e.host,
                device_kind=e.device.kind,
                backend=e.device.backend,
                provider=e.provider,
                model=e.model,
                kernel_path=e.kernel_path,
                kernel_sha256=e.kernel_sha256,
                bundle_digest=e.bundle_digest,
                measurement_key=e.measurement_key,
                output_dir=e.output_dir,
                label=e.label,
                triton_version=e.tool_versions.triton,
                torch_version=e.tool_versions.torch,
            )
        case CandidateProposed():
            rows.add(
                "proj_candidates",
                run_id=env.run_id,
                candidate_id=e.candidate_id,
                seq=env.seq,
                proposed_at=env.recorded_at,
                round=e.round,
                parent_id=e.parent_id,
                provider=e.provider,
                hypothesis=e.hypothesis,
                hypothesis_kind=e.hypothesis_kind,
                source_hash=e.source_hash,
                normalized_hash=e.normalized_hash,
                measurement_key=run.measurement_key,
                knobs=json.dumps(e.knobs, sort_keys=True),
            )
        case DecisionMade():
            rows.add(
                "proj_decisions",
                run_id=env.run_id,
                candidate_id=e.candidate_id,
                seq=env.seq,
                decided_at=env.recorded_at,
                outcome=e.outcome.value,
                reason=e.reason,
                speedup=e.speedup,
                ci_low=e.ci_low,
                ci_high=e.ci_high,
                compared_to=e.compared_to,
            )
        case BenchmarkSampled():
            cols = rows.columns["proj_samples"]
            n = len(e.samples_us)
            cols["run_id"].extend([env.run_id] * n)
            cols["candidate_id"].extend([e.candidate_id] * n)
            cols["case_id"].extend([e.case_id] * n)
            cols["phase"].extend([e.phase.value] * n)
            cols["block"].extend([e.block] * n)
            cols["sample_index"].extend(range(n))
            cols["sample_us"].extend(e.samples_us)
            cols["event_seq"].extend([env.seq] * n)
        case SourceStored():
            rows.add(
                "proj_sources",
                source_hash=e.source_hash,
                normalized_hash=e.normalized_hash,
                text=e.text,
                size_bytes=e.size_bytes,
            )
        case ExclusionRecorded():
            rows.add(
                "proj_exclusions",
                run_id=env.run_id,
                candidate_id=e.candidate_id,
                seq=env.seq,
                signature=e.signature,
                outcome=e.outcome.value,
                reason=e.reason,
                hypothesis=e.hypothesis,
                bundle_digest=run.bundle_digest,
                device_kind=run.device_kind,
            )
        case _:
            pass


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
        self._check_version()

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

    # ---- connections --------------------------------------------------------------------
    @contextmanager
    def _connect(self, write: bool) -> Iterator[duckdb.DuckDBPyConnection]:
        with store_lock(self.path, exclusive=write, timeout_s=self.lock_timeout_s):
            con = self._open_duckdb(write)
            try:
                yield con
            finally:
                con.close()

    def _open_duckdb(self, write: bool) -> duckdb.DuckDBPyConnection:
        config: dict[str, str | bool | int | float | list[str]] = (
            {} if write else {"enable_external_access": False}
        )
        deadline = time.monotonic() + self.lock_timeout_s
        delay = 0.005
        while True:
            try:
                return duckdb.connect(str(self.path), read_only=not write, config=config)
            except duckdb.IOException as exc:
                text = str(exc)
                if "lock" in text.lower() and time.monotonic() < deadline:
                    time.sleep(
                        delay
                    )  # held by a process outside tlxdb's lock (e.g. a duckdb shell)
                    delay = min(delay * 2, 0.2)
                    continue
                if "lock" in text.lower():
                    raise StoreBusyError(
                        f"store {self.path} is held by another program (not tlxdb) for {self.lock_timeout_s:g} s; close it and retry"
                    ) from None
                if "permission denied" in text.lower() or "read-only file system" in text.lower():
                    raise StoreError(f"store {self.path} is not writable") from None
                if (
                    "newer" in text.lower()
                    or "version" in text.lower()
                    and "storage" in text.lower()
                ):
                    raise StoreTooNewError(
                        f"store {self.path} was written by a newer DuckDB than {duckdb.__version__}; upgrade tlxdb"
                    ) from None
                raise StoreError(f"store {self.path} cannot be opened: {_one_line(exc)}") from None
            except duckdb.Error as exc:
                raise StoreError(f"store {self.path} cannot be opened: {_one_line(exc)}") from None

    def _create(self) -> None:
        with self._connect(write=True) as con:
            tables = {
                r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()
            }
            if "tlxdb_meta" in tables:
                return  # another process created it while we waited for the lock
            if tables:
                raise StoreError(f"{self.path} is a DuckDB file but not a tlxdb store")
            con.execute("BEGIN")
            con.execute(store_sql("schema"))
            con.execute(
                "INSERT INTO tlxdb_meta VALUES ('store_schema_version', ?), ('created_at', ?)",
                [str(STORE_SCHEMA_VERSION), datetime.now(UTC).isoformat()],
            )
            con.execute("COMMIT")

    def _check_version(self) -> None:
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

    @property
    def schema_version(self) -> int:
        return STORE_SCHEMA_VERSION

    # ---- writing ------------------------------------------------------------------------
    def ingest(self, envelopes: Iterable[Envelope]) -> int:
        """Add events not yet stored (idempotent by event_id); returns how many rows were added."""
        envs = list(envelopes)
        if not envs:
            return 0
        batch, digests = self._batch_table(envs)
        with self._connect(write=True) as con:
            con.execute("BEGIN")
            try:
                added = self._ingest_locked(con, envs, batch, digests)
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
        return added

    def ingest_log(self, path: str | os.PathLike[str]) -> int:
        """Ingest a run log (a file, or an output folder holding events.jsonl)."""
        return self.ingest(read_envelopes(path))

    @staticmethod
    def _batch_table(envs: Sequence[Envelope]) -> tuple[pa.Table, list[str]]:
        seen: dict[str, str] = {}
        cols: dict[str, list[Any]] = {name: [] for name in _SCHEMAS["events"].names}
        digests = []
        for env in envs:
            payload = codec.payload_json(env.event)
            digest = codec.body_digest(env, payload)
            prior = seen.get(env.event_id)
            if prior is not None and prior != digest:
                raise EventConflictError(
                    f"event {env.event_id} appears twice in one batch with different bodies"
                )
            seen[env.event_id] = digest
            cols["event_id"].append(env.event_id)
            cols["run_id"].append(env.run_id)
            cols["seq"].append(env.seq)
            cols["recorded_at"].append(env.recorded_at)
            cols["type"].append(env.event.type)
            cols["schema_version"].append(type(env.event).SCHEMA_VERSION)
            cols["payload"].append(payload)
            cols["body_digest"].append(digest)
            digests.append(digest)
        return pa.table(cols, schema=_SCHEMAS["events"]), digests

    def _ingest_locked(
        self,
        con: duckdb.DuckDBPyConnection,
        envs: list[Envelope],
        batch: pa.Table,
        digests: list[str],
    ) -> int:
        con.register("batch_events", batch)
        stored = {
            (r[0], r[1]): (r[2], r[3]) for r in con.execute(store_sql("existing_events")).fetchall()
        }
        runs = sorted({e.run_id for e in envs})
        heads = dict(
            con.execute(
                "SELECT run_id, next_seq FROM run_heads WHERE list_contains(?, run_id)", [runs]
            ).fetchall()
        )
        next_seq = {r: heads.get(r, 0) for r in runs}
        keep: list[bool] = []
        new_envs: list[Envelope] = []
        taken: set[tuple[str, int]] = set()
        for env, digest in zip(envs, digests, strict=True):
            key = (env.run_id, env.seq)
            if key in stored:
                event_id, stored_digest = stored[key]
                if event_id != env.event_id:
                    raise SequenceConflictError(
                        f"run {env.run_id} seq {env.seq} is already event {event_id}, not {env.event_id}: two logs claim one run"
                    )
                if stored_digest != digest:
                    raise EventConflictError(
                        f"event {env.event_id} (run {env.run_id} seq {env.seq}) is already stored with a different body"
                    )
                keep.append(False)
                continue
            if key in taken:  # the same event twice in one batch (same body: checked above)
                keep.append(False)
                continue
            if env.seq != next_seq[env.run_id]:
                raise SequenceConflictError(
                    f"run {env.run_id}: event seq {env.seq} leaves a gap; the store expects seq {next_seq[env.run_id]}"
                )
            next_seq[env.run_id] += 1
            taken.add(key)
            keep.append(True)
            new_envs.append(env)
        if not new_envs:
            return 0
        new = batch.filter(pa.array(keep))
        con.register("new_events", new)
        reused = con.execute(store_sql("reused_event_ids")).fetchone()
        if reused is not None:
            raise EventConflictError(
                f"event id {reused[0]} is already stored as run {reused[1]} seq {reused[2]} with a different body"
            )
        facts = self._run_facts(con, new_envs)
        rows = _Rows()
        for env in new_envs:
            _project(rows, env, facts)
        con.execute("INSERT INTO events BY NAME SELECT * FROM new_events")
        for table in _SCHEMAS:
            if table == "events" or not rows.columns[table][_SCHEMAS[table].names[0]]:
                continue
            con.register(f"new_{table}", rows.table(table))
            if table == "proj_sources":  # content-addressed: a text is stored once
                con.execute(
                    "INSERT INTO proj_sources BY NAME SELECT DISTINCT ON (source_hash) * FROM new_proj_sources n "
                    "WHERE NOT EXISTS (SELECT 1 FROM proj_sources s WHERE s.source_hash = n.source_hash)"
                )
            else:
                con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM new_{table}")
        changed = [r for r in runs if next_seq[r] != heads.get(r, 0)]
        con.execute("DELETE FROM run_heads WHERE list_contains(?, run_id)", [changed])
        con.execute(
            "INSERT INTO run_heads SELECT unnest(?), unnest(?)",
            [changed, [next_seq[r] for r in changed]],
        )
        return len(new_envs)

    @staticmethod
    def _run_facts(con: duckdb.DuckDBPyConnection, envs: list[Envelope]) -> dict[str, _RunFacts]:
        facts: dict[str, _RunFacts] = {}
        for env in envs:
            if isinstance(env.event, RunStarted):
                e = env.event
                facts[env.run_id] = _RunFacts(e.measurement_key, e.bundle_digest, e.device.kind)
        missing = sorted({e.run_id for e in envs} - facts.keys())
        if missing:
            for run_id, mk, bd, dk in con.execute(
                "SELECT run_id, measurement_key, bundle_digest, device_kind FROM proj_runs WHERE list_contains(?, run_id)",
                [missing],
            ).fetchall():
                facts[run_id] = _RunFacts(mk, bd, dk)
        return facts

    # ---- reading ------------------------------------------------------------------------
    def query(
        self,
        sql: str,
        params: Mapping[str, Any] | Sequence[Any] | None = None,
        views: Mapping[str, str] | None = None,
    ) -> pa.Table:
        """Run one read-only SELECT; `views` (name -> SELECT) are defined as temporary views first."""
        with self._connect(write=False) as con:
            try:
                statements = con.extract_statements(sql)
            except duckdb.Error as exc:
                raise QueryError(f"the query does not parse: {_one_line(exc)}") from None
            if len(statements) != 1:
                raise QueryError(f"give exactly one SQL statement, not {len(statements)}")
            kind = statements[0].type
            if kind not in (duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN):
                raise ReadOnlyQueryError(
                    f"queries are read-only; a {kind.name} statement is refused"
                )
            try:
                for name, body in (views or {}).items():
                    con.execute(f'CREATE TEMPORARY VIEW "{name}" AS {body}')
                return _arrow(con.execute(sql, params))
            except duckdb.Error as exc:
                raise QueryError(f"the query failed: {_one_line(exc)}") from None

    def run_envelopes(self, run_id: str) -> list[Envelope]:
        """Every stored event of one run, in seq order (upcast to the current versions)."""
        with self._connect(write=False) as con:
            rows = con.execute(store_sql("run_envelopes"), {"run_id": run_id}).fetchall()
        return [
            codec.decode(
                {
                    "event_id": r[0],
                    "run_id": r[1],
                    "seq": r[2],
                    "recorded_at": _EPOCH + timedelta(microseconds=r[3]),
                    "type": r[4],
                    "schema_version": r[5],
                    "payload": r[6],
                }
            )
            for r in rows
        ]

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
