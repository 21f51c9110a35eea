"""Ingest: a batch of envelopes becomes one Arrow table of records, is checked against the store
(idempotent by event id, dense sequences per run) and its new events are appended. The
functions taking a connection run inside the ingest's transaction, under the exclusive lock."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa

from tlxstore.errors import EventConflictError, SequenceConflictError
from tlxstore.store.reading import record
from tlxstore.store.sql import store_sql

if TYPE_CHECKING:  # the codec is imported where events are used: a query loads no event model
    from tlxstore.events import Envelope

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
    from tlxstore import codec

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
    from tlxstore import codec

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


@cache
def _append_statements() -> tuple[str, ...]:
    return tuple(st.query for st in duckdb.extract_statements(store_sql("ingest_append")))


def append_new(con: duckdb.DuckDBPyConnection, incoming: pa.Table) -> int:
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
            if record(stored) != record(offered):
                raise EventConflictError(
                    f"event {new_id} (run {run_id} seq {seq}) is already stored with a different body"
                )
        con.execute(store_sql("ingest_fresh"))  # a copy without the events already stored
        runs = con.execute(store_sql("ingest_checks")).fetchall()
    return _append_fresh(con, runs)


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
