"""The store's own SQL: statements read from tlxstore/sql/<name>.sql, and the small helpers every
part of the store uses to run them."""

from __future__ import annotations

from contextlib import suppress
from functools import cache
from importlib import resources
from pathlib import Path

import duckdb
import pyarrow as pa

ALIAS = "tlxstore"  # the store file's name inside a connection


@cache
def store_sql(name: str) -> str:
    """A statement of the store itself, from tlxstore/sql/<name>.sql."""
    return resources.files("tlxstore").joinpath("sql", f"{name}.sql").read_text()


def sql_quoted(path: Path | str) -> str:
    """A path as the inside of a single-quoted SQL string literal."""
    return str(path).replace("'", "''")


def rollback(con: duckdb.DuckDBPyConnection) -> None:
    """End a failed transaction. A COMMIT that failed (a full disk) has already ended it, and
    DuckDB then refuses the ROLLBACK: that refusal must not hide the failure itself."""
    with suppress(duckdb.TransactionException):
        con.execute("ROLLBACK")


def one_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type's name when it has none)."""
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


JSON_FIELD = {b"duckdb.type": b"JSON"}  # the metadata of a column DuckDB typed JSON (text in Arrow)


class TooManyRows(Exception):
    """A result held more rows than its reader takes (arrow's max_rows)."""


def arrow(result: duckdb.DuckDBPyConnection, max_rows: int | None = None) -> pa.Table:
    """A result as one Arrow table (whichever name this DuckDB gives the call). Columns of
    DuckDB's JSON type arrive as text; their fields carry JSON_FIELD, so a reader can nest them.
    With `max_rows`, a result of more rows raises TooManyRows once it passes them (batch by
    batch: the rest is never fetched)."""
    json_columns = {d[0] for d in result.description or () if str(d[1]) == "JSON"}
    if max_rows is None:
        to_table = getattr(result, "to_arrow_table", None) or result.fetch_arrow_table
        table = to_table()
    else:
        to_reader = getattr(result, "to_arrow_reader", None) or result.fetch_record_batch
        reader, batches, rows = to_reader(100_000), [], 0
        for batch in reader:
            rows += batch.num_rows
            if rows > max_rows:
                raise TooManyRows(max_rows)
            batches.append(batch)
        table = pa.Table.from_batches(batches, schema=reader.schema)
    if not json_columns:
        return table
    fields = [f.with_metadata(JSON_FIELD) if f.name in json_columns else f for f in table.schema]
    return table.cast(pa.schema(fields, metadata=table.schema.metadata))
