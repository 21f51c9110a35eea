"""Reading from the store: the check that keeps queries read-only, and stored rows back into
envelopes (upcast to the current event versions by the codec)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import duckdb

from tlxstore.errors import QueryError, ReadOnlyQueryError
from tlxstore.store.sql import one_line

if TYPE_CHECKING:  # the codec is imported where events are used: a query loads no event model
    from tlxstore.events import Envelope

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def check_read_only(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Refuse anything but one SELECT, or one EXPLAIN [ANALYZE] of one SELECT, judged on the
    parsed statements (EXPLAIN ANALYZE runs the statement it explains)."""
    statements = _parsed(con, sql)
    if len(statements) != 1:
        raise QueryError(f"give exactly one SQL statement, not {len(statements)}")
    statement = statements[0]
    if statement.type == duckdb.StatementType.SELECT:
        return
    if statement.type != duckdb.StatementType.EXPLAIN:
        raise ReadOnlyQueryError(
            f"queries are read-only; {_article(_kind(statement))} statement is refused"
        )
    explained = _explained(con, statement)
    if explained is None or explained.type != duckdb.StatementType.SELECT:
        what = "a statement it cannot parse" if explained is None else _article(_kind(explained))
        raise ReadOnlyQueryError(
            f"queries are read-only; EXPLAIN is allowed of one SELECT only, not of {what}"
        )


def _parsed(con: duckdb.DuckDBPyConnection, sql: str) -> list[duckdb.Statement]:
    try:
        return con.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(f"the query does not parse: {one_line(exc)}") from None


# What follows EXPLAIN: optionally ANALYZE, then the explained statement. Anything else (an options
# list, a comment between the words) leaves a text that is not one SELECT, and is refused.
_EXPLAIN = re.compile(r"\s*EXPLAIN\s+(?:ANALYZE\s+)?", re.IGNORECASE)


def _explained(
    con: duckdb.DuckDBPyConnection, explain: duckdb.Statement
) -> duckdb.Statement | None:
    """The statement an EXPLAIN statement explains, parsed; None when there is not exactly one."""
    head = _EXPLAIN.match(explain.query)
    if head is None:
        return None
    try:
        inner = con.extract_statements(explain.query[head.end() :])
    except duckdb.Error:
        return None
    return inner[0] if len(inner) == 1 else None


def _kind(statement: duckdb.Statement) -> str:
    """A statement's kind as a user wrote it (DuckDB files INSTALL under LOAD)."""
    words = statement.query.split()
    if statement.type == duckdb.StatementType.LOAD and "INSTALL" in (w.upper() for w in words[:2]):
        return "INSTALL"
    name = statement.type.name
    return name if name.isidentifier() else (words[0].upper() if words else "empty")


def _article(word: str) -> str:
    return f"{'an' if word[:1].upper() in 'AEIOU' else 'a'} {word}"


def record(row: dict[str, Any]) -> Envelope:
    """One stored row (recorded_at as `recorded_at_us`: microseconds since the epoch), decoded."""
    from tlxstore import codec

    return codec.decode(
        {**row, "recorded_at": _EPOCH + timedelta(microseconds=row["recorded_at_us"])}
    )


def envelopes(rows: Sequence[tuple[Any, ...]]) -> list[Envelope]:
    """Rows of run_envelopes.sql (event_id, run_id, seq, recorded_at in us, type,
    schema_version, payload) decoded with one pydantic call."""
    from tlxstore import codec

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
