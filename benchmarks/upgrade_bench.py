"""How long tlxdb's store schema upgrade from v8 to the current schema takes on a big store
(the first open after upgrading tlxdb; it runs under the store's exclusive lock, so every other
tlxdb command waits).

    python benchmarks/upgrade_bench.py [--scale 1.0] [--workdir DIR] [--out FILE.json]

Generates store_bench.py's big store (`--scale` 1.0: 10,000 runs of 100 candidates, 6M events,
10M samples), turns it into what schema v8 wrote (no `instance` column on proj_samples and
proj_machine, nor v10's instance columns on proj_decisions: tlxstore.testing.as_schema_v8), then
opens it with tlxdb's Store, which upgrades it (tlxstore/sql/upgrade_v9.sql, upgrade_v10.sql, each
step a transaction), and times that open; a second open, with nothing to upgrade, is timed beside
it. Checks that every sample got its instance.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import duckdb

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from store_bench import generate_big_store, host  # noqa: E402

from tlxstore.store import Store  # noqa: E402
from tlxstore.testing import as_schema_v8  # noqa: E402


def timed_open(path: Path) -> float:
    t0 = time.perf_counter()
    Store(path).close()
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=float, default=1.0, help="fraction of 1M candidates")
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--out", type=Path, help="where the JSON result goes")
    args = ap.parse_args(argv)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="upgrade-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    path = work / "big.duckdb"
    path.unlink(missing_ok=True)
    runs, cands, keys = max(10, int(10_000 * args.scale)), 100, max(1, int(1_000 * args.scale))
    generated = generate_big_store(path, runs, cands, keys)
    as_schema_v8(path)
    upgrade_s = timed_open(path)
    reopen_s = timed_open(path)
    con = duckdb.connect(str(path), read_only=True)
    missing = con.execute("SELECT count(*) FROM proj_samples WHERE instance IS NULL").fetchone()
    version = con.execute(
        "SELECT value FROM tlxdb_meta WHERE key = 'store_schema_version'"
    ).fetchone()
    con.close()
    result = {
        **host(),
        "scale": args.scale,
        "rows_events": generated["rows_events"],
        "rows_proj_samples": generated["rows_proj_samples"],
        "size_bytes": generated["size_bytes"],
        "upgraded_from": 8,
        "upgrade_s": round(upgrade_s, 2),
        "open_after_s": round(reopen_s, 3),
        "samples_without_instance": missing[0] if missing else None,
        "schema_version_after": version[0] if version else None,
    }
    text = json.dumps(result, indent=1)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0 if result["samples_without_instance"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
