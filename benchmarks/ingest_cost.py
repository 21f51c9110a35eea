"""What a change to the projections costs the ingest: store_bench.py's ingest series, small
enough to run several times in alternation with another tree's copy of this script (so both see
the same load): 16 batches of 10k events into an empty store and the projection pass after them,
one event per ingest, and one candidate (11 events, projected in its ingest, as the loop does)
into a generated store of --big-scale of the 1M candidates. Prints one JSON object.

Usage: python benchmarks/ingest_cost.py [--big-scale 0.1]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

from store_bench import (
    bench_candidate_ingest,
    bench_ingest,
    bench_one_event_ingest,
    generate_big_store,
)

from tlxstore.store import Store


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--big-scale", type=float, default=0.1)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ingest-cost-"))
    res: dict[str, object] = {"loadavg_at_start": os.getloadavg()}
    empty = Store(work / "empty.duckdb")
    res["ingest_empty_store"] = bench_ingest(empty, batches=16, batch_size=10_000, tag="e")
    res["one_event_ingest_p50_ms"] = bench_one_event_ingest(empty)
    runs = max(10, int(10_000 * args.big_scale))
    generate_big_store(work / "big.duckdb", runs, 100, max(1, int(1_000 * args.big_scale)))
    res["candidate_ingest_big_store"] = bench_candidate_ingest(Store(work / "big.duckdb"), n=48)
    res["loadavg_at_end"] = os.getloadavg()
    print(json.dumps(res))


if __name__ == "__main__":
    main()
