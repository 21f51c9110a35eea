"""What DuckDB itself costs for Store.ingest's work, outside Store's per-call design (a companion
of store_bench.py, for the question whether 100k events/s at 10k-event batches is reachable).

Runs Store.ingest's own statements (tlxstore/sql: checks, reused ids, every INSERT of
ingest_write.sql) over 16 batches of 10k events in three setups, each on a new store:
- per_call: as Store does it (attach, transaction, COMMIT with checkpoint, detach), no merges;
- long_lived: one connection that keeps the file attached and commits to the WAL only, with one
  checkpoint at the end (what a per-host writer process holding the file would do);
- events_only / projections_only: per_call with only the events INSERT, or only the others;
- without_samples_and_sources: per_call without the two projections the loop's lookups do not
  read (proj_samples, one row per sample; proj_sources, the source texts), as if the views
  computed them from `events`.
Reports, per setup, the p50 of the SQL and COMMIT of a batch and the rate over all batches
(the Arrow table built in Python is left out: it is the same in every setup).
Usage: python benchmarks/store_ingest_floor.py [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import duckdb
from store_bench import envelopes, mixed_events

from tlxstore.store import ALIAS, Store, _write_statements, incoming_table, sql_quoted, store_sql
from tlxstore.testing import run_started

BATCHES, SIZE = 16, 10_000


def _instance(store: Store, wal_only: bool) -> duckdb.DuckDBPyConnection:
    """The store's own DuckDB instance (Store._new_instance), merging off, and for wal_only
    commits that never checkpoint."""
    con = store._new_instance()
    con.execute("SET max_vacuum_tasks = 0")
    if wal_only:
        con.execute("SET wal_autocheckpoint = '100GB'")
    return con


def _keeps(setup: str, statement: str) -> bool:
    """Whether `setup` runs this statement of ingest_write.sql (run_heads always)."""
    table = re.search(r"INSERT INTO (\w+)", statement)
    if table is None or table.group(1) == "run_heads":
        return True
    if setup == "events_only":
        return table.group(1) == "events"
    if setup == "projections_only":
        return table.group(1) != "events"
    if setup == "without_samples_and_sources":
        return table.group(1) not in ("proj_samples", "proj_sources")
    return True


def _run(setup: str, work: Path, tables) -> dict[str, float]:
    path = work / f"{setup}.duckdb"
    store = Store(path)
    store.close()
    attach = f"ATTACH '{sql_quoted(path)}' AS {ALIAS}"
    long_lived = setup == "long_lived"
    con = _instance(store, wal_only=long_lived)
    if long_lived:
        con.execute(attach)
        con.execute(f"USE {ALIAS}")
    statements = [st for _, st in _write_statements() if _keeps(setup, st)]
    sql_ms, commit_ms, total = [], [], 0.0
    for incoming in tables:
        t0 = time.perf_counter()
        if not long_lived:
            con.execute(attach)
            con.execute(f"USE {ALIAS}")
        con.execute("BEGIN")
        con.register("incoming", incoming)
        con.execute("CREATE OR REPLACE TEMPORARY VIEW fresh AS SELECT * FROM incoming")
        con.execute(store_sql("ingest_checks")).fetchall()
        con.execute(store_sql("ingest_reused_ids")).fetchall()
        for st in statements:
            con.execute(st)
        t1 = time.perf_counter()
        con.execute("COMMIT")
        t2 = time.perf_counter()
        if not long_lived:
            con.execute("USE memory")
            con.execute(f"DETACH {ALIAS}")
        total += time.perf_counter() - t0
        sql_ms.append((t1 - t0) * 1e3)
        commit_ms.append((t2 - t1) * 1e3)
    out = {"sql_ms_p50": statistics.median(sql_ms), "commit_ms_p50": statistics.median(commit_ms)}
    out["events_per_s"] = BATCHES * SIZE / total
    if long_lived:
        wal = Path(f"{path}.wal")
        out["wal_mb_before_checkpoint"] = wal.stat().st_size / 1e6 if wal.exists() else 0.0
        t0 = time.perf_counter()
        con.execute("CHECKPOINT")
        checkpoint_s = time.perf_counter() - t0
        out["final_checkpoint_ms"] = checkpoint_s * 1e3
        out["events_per_s_with_checkpoint"] = BATCHES * SIZE / (total + checkpoint_s)
    con.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ingest-floor-"))
    tables = [
        incoming_table(envelopes(f"r{b}", [run_started(), *mixed_events(SIZE - 1, f"t{b}")]))
        for b in range(BATCHES)
    ]
    res: dict[str, object] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": platform.node(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "duckdb": duckdb.__version__,
        "batches": BATCHES,
        "batch_size": SIZE,
    }
    setups = (
        "per_call",
        "long_lived",
        "events_only",
        "projections_only",
        "without_samples_and_sources",
    )
    for setup in setups:
        res[setup] = _run(setup, work, tables)
        print(setup, json.dumps(res[setup]))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "store_ingest_floor.json").write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
