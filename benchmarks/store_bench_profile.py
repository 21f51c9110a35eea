"""Where one 50,000-event Store.ingest spends its time (Python table, each SQL statement of the
append, COMMIT with its checkpoint), and then the projection pass over those events (each
statement of project.sql, COMMIT). A companion of store_bench.py, for reading its figures."""

from __future__ import annotations

import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from tlxstore.events import Envelope, new_event_id
from tlxstore.store import Store
from tlxstore.store.ingest import incoming_table
from tlxstore.store.projection import projection_statements
from tlxstore.store.sql import store_sql
from tlxstore.testing import candidate_events, run_started


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="ingest-profile-"))
    Store(work / "s.duckdb").close()
    events = [run_started()]
    i = 0
    while len(events) < 50_000:
        events += candidate_events(f"c{i:05d}", f"src {i}", samples=10)
        i += 1
    now = datetime.now(UTC)
    envs = [
        Envelope(event_id=new_event_id(), run_id="r1", seq=n, recorded_at=now, event=e)
        for n, e in enumerate(events[:50_000])
    ]
    t0 = time.perf_counter()
    incoming = incoming_table(envs)
    print(f"python: incoming_table {(time.perf_counter() - t0) * 1e6 / len(envs):.2f} us/event")
    con = duckdb.connect()
    con.execute(store_sql("macros"))
    con.execute("PRAGMA disable_checkpoint_on_shutdown")  # as Store's instance: the
    con.execute("SET wal_autocheckpoint = '0KB'")  # checkpoint is part of COMMIT
    con.execute(f"ATTACH '{work / 's.duckdb'}' AS t")
    con.execute("USE t")
    con.execute("BEGIN")
    con.register("incoming", incoming)
    con.execute("CREATE TEMPORARY VIEW fresh AS SELECT * FROM incoming")
    statements = [
        ("checks", store_sql("ingest_checks")),
        ("reused ids", store_sql("ingest_reused_ids")),
    ]
    for stmt in duckdb.extract_statements(store_sql("ingest_append")):
        first = next(ln for ln in stmt.query.strip().splitlines() if not ln.startswith("--"))
        statements.append((first[:40], stmt.query))
    statements += [("COMMIT", "COMMIT"), ("pass: BEGIN", "BEGIN")]
    statements.append(
        (
            "pass: unprojected",
            store_sql("project_tail").replace("$lo", "0").replace("$hi", str(len(envs))),
        )
    )
    statements += [(f"pass: {kind}", sql) for kind, sql in projection_statements()]
    statements.append(("pass: COMMIT", "COMMIT"))
    for name, sql in statements:
        t0 = time.perf_counter()
        con.execute(sql)
        print(f"sql: {name}: {(time.perf_counter() - t0) * 1000:.1f} ms")
    t0 = time.perf_counter()
    con.execute("USE memory")
    con.execute("DETACH t")
    print(f"detach: {(time.perf_counter() - t0) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
