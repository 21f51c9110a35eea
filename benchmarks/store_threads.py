"""How the DuckDB thread count of the store's instance affects Store.ingest (a companion of
store_bench.py). For each thread count: 16 batches of 10k events and 3 of 100k into a new store
(events/s over all batches, and the parts of a 10k ingest), and 40 one-candidate ingests (11
events) after them. Usage: python benchmarks/store_threads.py [--threads 1,2,4] [--out DIR]"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import duckdb
from store_bench import INGEST_PARTS, envelopes, mixed_events

from tlxstore.store import Store
from tlxstore.testing import candidate_events, run_started


def _store(path: Path, threads: int) -> Store:
    class Threads(Store):
        def _new_instance(self) -> duckdb.DuckDBPyConnection:
            con = super()._new_instance()
            con.execute(f"SET threads = {threads}")
            return con

    return Threads(path)


def _batches(store: Store, n: int, size: int, tag: str) -> dict[str, float]:
    total = 0.0
    parts: dict[str, list[float]] = {p: [] for p in INGEST_PARTS}
    for b in range(n):
        envs = envelopes(f"{tag}{b}", [run_started(), *mixed_events(size - 1, f"{tag}{b}")])
        t0 = time.perf_counter()
        store.ingest(envs)
        total += time.perf_counter() - t0
        for p in INGEST_PARTS:
            parts[p].append(getattr(store.last_ingest, p))
    return {"events_per_s": n * size / total, **{p: statistics.median(v) for p, v in parts.items()}}


def measure(threads: int, work: Path) -> dict[str, object]:
    store = _store(work / f"t{threads}.duckdb", threads)
    out: dict[str, object] = {"threads": threads}
    out["10k"] = _batches(store, 16, 10_000, "a")
    out["100k"] = _batches(store, 3, 100_000, "b")
    store.ingest(envelopes("loop", [run_started()]))
    seq, lat = 1, []
    for i in range(40):
        events = candidate_events(f"l{i}", f"def k(): return {i}", samples=10)
        envs = envelopes("loop", events, start=seq)
        seq += len(events)
        t0 = time.perf_counter()
        store.ingest(envs)
        lat.append((time.perf_counter() - t0) * 1e3)
    out["candidate_ingest_p50_ms"] = statistics.median(lat)
    store.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default=f"1,2,4,{os.cpu_count()}")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="store-threads-"))
    res = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": platform.node(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "duckdb": duckdb.__version__,
        "runs": [measure(int(t), work) for t in args.threads.split(",")],
    }
    text = json.dumps(res, indent=2)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"store_threads.{res['cpu_count']}cpu.json").write_text(text + "\n")


if __name__ == "__main__":
    main()
