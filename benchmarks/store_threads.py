"""How the DuckDB thread count of the store's instance affects Store.ingest (a companion of
store_bench.py). For each thread count: 16 batches of 10k events and 3 of 100k into a new store
(events/s over all batches, and the parts of a 10k ingest), and 40 one-candidate ingests (11
events) after them. Usage: python benchmarks/store_threads.py [--threads 1,2,4] [--out DIR]"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

import duckdb
from store_bench import INGEST_PARTS, bench_candidate_ingest, bench_ingest, host

from tlxstore.store import Store


def _store(path: Path, threads: int) -> Store:
    class Threads(Store):
        def _new_instance(self) -> duckdb.DuckDBPyConnection:
            con = super()._new_instance()
            con.execute(f"SET threads = {threads}")
            return con

    return Threads(path)


def _batches(store: Store, n: int, size: int, tag: str) -> dict[str, float]:
    """store_bench's bench_ingest, in this script's result keys."""
    r = bench_ingest(store, n, size, tag)
    return {"events_per_s": r["events_per_s_total"], **{p: r[f"{p}_p50"] for p in INGEST_PARTS}}


def measure(threads: int, work: Path) -> dict[str, object]:
    store = _store(work / f"t{threads}.duckdb", threads)
    out: dict[str, object] = {"threads": threads}
    out["10k"] = _batches(store, 16, 10_000, "a")
    out["100k"] = _batches(store, 3, 100_000, "b")
    out["candidate_ingest_p50_ms"] = bench_candidate_ingest(store, n=40)["p50_ms"]
    store.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default=f"1,2,4,{os.cpu_count()}")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="store-threads-"))
    res = {
        **host(),
        "runs": [measure(int(t), work) for t in args.threads.split(",")],
    }
    text = json.dumps(res, indent=2)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"store_threads.{res['cpu_count']}cpu.json").write_text(text + "\n")


if __name__ == "__main__":
    main()
