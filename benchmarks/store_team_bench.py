"""The team store beside the local one (issue 18): the same store_bench functions, scaled down,
on a DuckDB file and on a team store (DuckLake, PostgreSQL catalog on 127.0.0.1, Parquet in a
local folder). Writes benchmarks/results/store_team_bench.{json,md}.

Measures per store, with the real library calls: batched ingest (bench_ingest: 10k-event
batches, then the projection pass), loop-sized ingests (bench_candidate_ingest: one candidate,
11 events, per call), one event per ingest, the per-call cost (bench_open_close: a `SELECT 1`
through Store.query), the dedup lookup and prompt context right after another Store wrote a
candidate (bench_lookups_after_write: the replica's refresh included), and the replay of a
run (bench_replay). Scaled down from store_bench (no 1M-candidate big store; fewer batches,
calls and candidates), so compare the two columns with each other, not with store_bench.md.

PostgreSQL is started as the tests start it (tests/support/servers.py: Debian's postgresql
package), or given with --team-url.

Usage: python benchmarks/store_team_bench.py [--team-url URL] [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path

import duckdb

HERE = Path(__file__).resolve().parent
sys.path.append(str(HERE))  # store_bench, beside this script

import store_bench  # noqa: E402

from tlxstore.store import Store  # noqa: E402
from tlxstore.team import TeamStore  # noqa: E402

SCALE = {
    "ingest_batches": 4,
    "ingest_batch_size": 10_000,
    "candidate_ingests": 12,
    "one_event_ingests": 12,
    "open_close_calls": 20,
    "lookup_calls": 10,
    "replay_candidates": 200,
}


def measure(make: callable, label: str) -> dict:  # type: ignore[valid-type]
    store, writer = make(), make()
    out: dict = {"store": label}
    out["ingest_10k"] = store_bench.bench_ingest(
        store, SCALE["ingest_batches"], SCALE["ingest_batch_size"], label
    )
    out["candidate_ingest"] = store_bench.bench_candidate_ingest(store, SCALE["candidate_ingests"])
    out["one_event_ingest_p50_ms"] = store_bench.bench_one_event_ingest(
        store, SCALE["one_event_ingests"]
    )
    out["open_close_p50_ms"] = store_bench.bench_open_close(store, SCALE["open_close_calls"])
    out["lookups_after_write"] = store_bench.bench_lookups_after_write(
        store, writer, keys=1, calls=SCALE["lookup_calls"]
    )
    out["replay"] = store_bench.bench_replay(store, SCALE["replay_candidates"])
    store.close()
    writer.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--team-url", default=None, help="a team store URL (default: start PostgreSQL)")
    ap.add_argument("--out", type=Path, default=HERE / "results")
    args = ap.parse_args()
    started = datetime.now(UTC)
    load = os.getloadavg()
    with ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="team-bench-")))
        url = args.team_url
        if url is None:
            # tests/support/servers.py; tests/ goes on the path only now, after every package
            # of tlxdb is imported (its test folders share their names)
            sys.path.append(str(HERE.parent / "tests"))
            from support.servers import running_postgres

            url = stack.enter_context(running_postgres()).store_url(work / "lake", "bench")
        t0 = time.perf_counter()
        TeamStore(url).close()
        created_s = time.perf_counter() - t0
        local = measure(lambda: Store(work / "local.duckdb"), "local")
        team = measure(lambda: TeamStore(url), "team")
    import pyarrow
    import pydantic

    res = {
        "date": started.isoformat(timespec="seconds"),
        "machine": f"{platform.node()} ({os.cpu_count()} CPUs), {platform.platform()}",
        "load_average_at_start": load,
        "versions": {
            "python": platform.python_version(),
            "duckdb": duckdb.__version__,
            "pyarrow": pyarrow.__version__,
            "pydantic": pydantic.__version__,
        },
        "scale": SCALE,
        "team_store_create_s": created_s,
        "results": [local, team],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "store_team_bench.json").write_text(json.dumps(res, indent=1))
    (args.out / "store_team_bench.md").write_text(render(res))
    print(render(res))


def render(res: dict) -> str:
    local, team = res["results"]
    rows = [
        (
            "batched ingest, 10k-event batches, events/s over all",
            "ingest_10k",
            "events_per_s_total",
            "{:,.0f}",
        ),
        (
            "the same with the projection pass after them, events/s",
            "ingest_10k",
            "events_per_s_with_pass",
            "{:,.0f}",
        ),
        ("one candidate (11 events) per ingest, p50 ms", "candidate_ingest", "p50_ms", "{:.1f}"),
        ("one candidate per ingest, max ms", "candidate_ingest", "max_ms", "{:.1f}"),
        ("one event per ingest, p50 ms", None, "one_event_ingest_p50_ms", "{:.1f}"),
        (
            "a store call (`SELECT 1` through Store.query), p50 ms",
            None,
            "open_close_p50_ms",
            "{:.1f}",
        ),
        (
            "dedup lookup after another Store's write (refresh included), p50 ms",
            "lookups_after_write",
            "dedup_after_write_p50_ms",
            "{:.1f}",
        ),
        (
            "prompt context after that refresh, p50 ms",
            "lookups_after_write",
            "context_after_refresh_p50_ms",
            "{:.1f}",
        ),
        (
            f"replay of a {res['scale']['replay_candidates']}-candidate run, s",
            "replay",
            "replay_1000_candidates_s",
            "{:.2f}",
        ),
    ]

    def cell(r: dict, group: str | None, key: str, fmt: str) -> str:
        return fmt.format((r[group] if group else r)[key])

    lines = [
        "# Team store beside the local store",
        "",
        f"{res['date']}, {res['machine']}; load average at start {res['load_average_at_start'][0]:.2f}; "
        + ", ".join(f"{k} {v}" for k, v in res["versions"].items())
        + ". Scaled down from store_bench (`benchmarks/store_team_bench.py`; scale in the JSON). "
        "The team store: DuckLake 1.0, PostgreSQL 15 catalog on 127.0.0.1 (fsync off), Parquet "
        f"in a local folder; creating it took {res['team_store_create_s']:.2f} s.",
        "",
        "| | local DuckDB file | team store |",
        "|---|---|---|",
    ]
    lines += [
        f"| {name} | {cell(local, g, k, f)} | {cell(team, g, k, f)} |" for name, g, k, f in rows
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
