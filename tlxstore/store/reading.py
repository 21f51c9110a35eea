"""Reading from the store: the check that keeps queries read-only, and stored rows back into
envelopes (upcast to the current event versions by the codec)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import duckdb

from tlxstore import codec
from tlxstore.errors import QueryError, ReadOnlyQueryError
from tlxstore.events import Envelope
from tlxstore.store.sql import one_line

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def check_read_only(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Refuse anything but one SELECT (or EXPLAIN) statement."""
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(f"the query does not parse: {one_line(exc)}") from None
    if len(statements) != 1:
        raise QueryError(f"give exactly one SQL statement, not {len(statements)}")
    kind = statements[0].type
    if kind not in (duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN):
        raise ReadOnlyQueryError(f"queries are read-only; a {kind.name} statement is refused")


def record(row: dict[str, Any]) -> Envelope:
    """One stored row (recorded_at as `recorded_at_us`: microseconds since the epoch), decoded."""
    return codec.decode(
        {**row, "recorded_at": _EPOCH + timedelta(microseconds=row["recorded_at_us"])}
    )


def envelopes(rows: Sequence[tuple[Any, ...]]) -> list[Envelope]:
    """Rows of run_envelopes.sql (event_id, run_id, seq, recorded_at in us, type,
    schema_version, payload) decoded with one pydantic call."""
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
