"""The store file's tables and their version: creating them, checking a file is a store this
tlxdb can read, and upgrading an older one (tlxstore/sql/schema.sql, upgrade_v2.sql .. upgrade_v12.sql)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from tlxstore.errors import StoreError, StoreTooNewError
from tlxstore.store.projection import projection_statements
from tlxstore.store.sql import ALIAS, store_sql

# 2: events.pos and projection_state; 3: proj_failures and proj_decisions.measured; 4: what the
# views read of the payloads (proj_runs and proj_candidates columns, proj_finishes,
# proj_revalidations, proj_case_speedups, proj_exchanges, proj_baselines,
# run_heads.last_event_at); 5: proj_run_candidates (each run's candidate count and best promoted
# candidate); 6: measurement windows and notes (proj_samples.window_id, proj_notes); 7: the
# machine's state per benchmark call (proj_machine); 8: each run's case parameters and
# --prior-run runs (proj_run_inputs); 9: the instance of each sample and machine state; 10: what
# a decision's interval carried of instances (proj_decisions.instance_*); 11: a run's kernel is the
# first @triton.jit function its baseline launches; 12: a run's candidate count leaves the
# baseline aside. An older store is upgraded on open, one step after another.
STORE_SCHEMA_VERSION = 12
# the tables a step creates (or empties) that project.sql fills: the step fills them for the events projected
# before it, with project.sql's own statements for them, over the temporary tables those read
# (`unprojected`, `decided`), which the step makes
NEW_PROJECTIONS = {
    4: (
        "proj_finishes",
        "proj_revalidations",
        "proj_case_speedups",
        "proj_exchanges",
        "proj_baselines",
    ),
    5: ("proj_run_candidates",),
    8: ("proj_run_inputs",),
    11: ("proj_baselines",),  # emptied by the step: every baseline projected again
}
_TEMPORARY = ("unprojected", "decided")


def create(con: duckdb.DuckDBPyConnection, path: str | Path, schema_sql: str) -> None:
    """Under the exclusive lock: create the store's tables in the attached file, unless another
    process did meanwhile; a DuckDB file holding other tables is refused."""
    tables = {
        r[0]
        for r in con.execute(
            f"SELECT table_name FROM duckdb_tables() WHERE database_name = '{ALIAS}'"
        ).fetchall()
    }
    if "tlxdb_meta" in tables:
        return  # another process created it while we waited for the lock
    if tables:
        raise StoreError(f"{path} is a DuckDB file but not a tlxdb store")
    con.execute("BEGIN")
    con.execute(schema_sql)
    con.execute(
        "INSERT INTO tlxdb_meta VALUES ('store_schema_version', ?), ('created_at', ?)",
        [str(STORE_SCHEMA_VERSION), datetime.now(UTC).isoformat()],
    )
    con.execute("COMMIT")


def stored_version(con: duckdb.DuckDBPyConnection, path: str | Path) -> int:
    """The attached file's schema version; refuses a file that is not a store or is too new."""
    try:
        row = con.execute(
            "SELECT value FROM tlxdb_meta WHERE key = 'store_schema_version'"
        ).fetchone()
    except duckdb.CatalogException:
        raise StoreError(f"{path} is a DuckDB file but not a tlxdb store") from None
    if row is None:
        raise StoreError(f"{path} has no store schema version; it is not a tlxdb store")
    version = int(row[0])
    if version > STORE_SCHEMA_VERSION:
        raise StoreTooNewError(
            f"store {path} has schema v{version}, written by a newer tlxdb (this one reads up to "
            f"v{STORE_SCHEMA_VERSION}); upgrade tlxdb"
        )
    return version


def upgrade(con: duckdb.DuckDBPyConnection) -> None:
    """Under the exclusive lock: bring an older store to the current schema step by step, each
    step one transaction that ends by recording its version (an upgrade cut short leaves a store
    of an older version, whole, which the next open carries on from; and DuckDB refuses to commit
    a transaction that adds a column to a table it updated, as v3 and v10 do to proj_decisions)
    (upgrade_v2.sql: events gains `pos`, NULL for the events a v1 store projected as
    they came, and projection_state starts with all of them projected; upgrade_v3.sql: the
    measured flag of decisions; upgrade_v4.sql: the projected columns the views read;
    upgrade_v5.sql: each run's candidate count and best promoted candidate; upgrade_v6.sql:
    measurement windows and notes; upgrade_v7.sql: the machine's state per benchmark call;
    upgrade_v8.sql: each run's case parameters and prior runs; upgrade_v9.sql: the instance a
    benchmark call measured; upgrade_v10.sql: what a decision's interval carried of instances; upgrade_v11.sql: a run's
    kernel is the first @triton.jit function its baseline launches; upgrade_v12.sql: a run's
    candidate count leaves the baseline aside).
    Nothing is done
    when another process upgraded it meanwhile."""
    row = con.execute("SELECT value FROM tlxdb_meta WHERE key = 'store_schema_version'").fetchone()
    if row is None or int(row[0]) >= STORE_SCHEMA_VERSION:
        return
    for version in range(int(row[0]) + 1, STORE_SCHEMA_VERSION + 1):
        con.execute("BEGIN")
        try:
            con.execute(store_sql(f"upgrade_v{version}"))
            if version in NEW_PROJECTIONS:
                for _type, statement in projection_statements():
                    if _target(statement) in NEW_PROJECTIONS[version]:
                        con.execute(statement)
                for table in _TEMPORARY:
                    con.execute(f"DROP TABLE IF EXISTS {table}")
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise


def _target(statement: str) -> str | None:
    """The table a statement of project.sql writes (INSERT or UPDATE), if any."""
    code = re.sub(r"--[^\n]*", "", statement)  # a comment names no target
    found = re.search(r"\b(?:INSERT INTO|UPDATE)\s+(\w+)", code)
    return found.group(1) if found else None
