"""Projection passes: the proj_* tables hold the projections of exactly the events below
projection_state.projected_pos. A pass (tlxstore/sql/project.sql: one INSERT per table over
every event not yet projected, never row by row) commits with the advance of projected_pos.
Passes run in pos order, because a pass joins what the passes before it stored (a decision takes
its candidate's identity from proj_candidates). Every function here runs on a connection with
the store attached; the callers hold the lock and decide the transactions."""

from __future__ import annotations

import re
from functools import cache

import duckdb

from tlxstore.errors import StoreError
from tlxstore.store.sql import rollback, store_sql

# A pass over this many events or more is a bulk pass: its COMMIT merges (merge_if_due).
BULK_PASS = 1_000
PROJECT_CHUNK = 1_000_000  # events per statement set of a pass (per transaction when catching up)
COMPACT_EVERY = 8  # every 8th projection pass merges small row groups (merge_if_due)
_VACUUM_TASKS = 100  # DuckDB's default max_vacuum_tasks: the merges one compaction may run


@cache
def projection_statements() -> tuple[tuple[str, str], ...]:
    """project.sql, statement by statement, each with the one event type it projects (the
    `FROM unprojected WHERE type = '...'` it reads). A statement that reads no event type
    continues the one before it (it reads the temporary table that one made) and takes its type,
    so the two run together or not at all."""
    out: list[tuple[str, str]] = []
    for statement in duckdb.extract_statements(store_sql("project")):
        types = set(re.findall(r"FROM unprojected WHERE type = '(\w+)'", statement.query))
        if len(types) > 1 or (not types and not out):
            raise StoreError("each projection in project.sql reads one event type")
        out.append((types.pop() if types else out[-1][0], statement.query))
    return tuple(out)


def project_pending(con: duckdb.DuckDBPyConnection, limit: int | None = None) -> int:
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
    for event_type, statement in projection_statements():
        if event_type in types:  # no rows of a type, nothing to project
            con.execute(statement)
    con.execute("UPDATE projection_state SET projected_pos = ?, catch_ups = catch_ups + 1", [hi])
    con.execute("DROP TABLE unprojected")
    return hi - lo


def project_all(con: duckdb.DuckDBPyConnection) -> int:
    """Inside a transaction (an ingest's): project every event behind, PROJECT_CHUNK events at a
    time, so memory stays bounded; returns how many."""
    done = 0
    while (n := project_pending(con, limit=PROJECT_CHUNK)) == PROJECT_CHUNK:
        done += n
    return done + n


def catch_up(con: duckdb.DuckDBPyConnection) -> int:
    """Under the exclusive lock: project every event behind (a store an older tlxdb left
    behind), PROJECT_CHUNK events per transaction; returns how many."""
    done = 0
    while True:
        con.execute("BEGIN")
        try:
            n = project_pending(con, limit=PROJECT_CHUNK)
            merge_if_due(con, n, bulk=True)
            con.execute("COMMIT")
        except BaseException:
            rollback(con)
            raise
        done += n
        if n < PROJECT_CHUNK:
            return done


def merge_if_due(con: duckdb.DuckDBPyConnection, projected: int, bulk: bool = False) -> None:
    """Set whether this transaction's COMMIT merges small row groups (of every table): only
    with a projection pass, and then if it is the COMPACT_EVERY-th pass, or (`bulk`) a pass
    that caught up BULK_PASS events or more (events an older tlxdb appended in groups left
    for a pass to merge). Every ingest is its own pass, so its row groups are merged once
    every COMPACT_EVERY ingests."""
    due = False
    if projected:
        row = con.execute("SELECT catch_ups FROM projection_state").fetchone()
        due = (bulk and projected >= BULK_PASS) or (row is not None and row[0] % COMPACT_EVERY == 0)
    con.execute(f"SET max_vacuum_tasks = {_VACUUM_TASKS if due else 0}")


def lag(con: duckdb.DuckDBPyConnection) -> int:
    """How many stored events the proj_* tables do not hold yet."""
    row = con.execute("SELECT next_pos - projected_pos FROM projection_state").fetchone()
    return int(row[0]) if row else 0
