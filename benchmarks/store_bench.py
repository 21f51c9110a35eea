"""Benchmark of the evidence store (issue 2). Writes benchmarks/results/store_bench.json and .md.

Measures, each with the real library calls:
- batched append throughput: Store.ingest of 10,000-event batches of a realistic event mix
  (events/s over all batches, and the p50), on an empty store and on the big store, and of
  50k- and 100k-event batches, each followed by Store.project (timed, and a rate with it
  counted; every ingest now projects its own batch, so it finds nothing left); RunLog.append of 10k-event batches; a
  whole 100k-event run log read back (read_envelopes), ingested end to end (Store.ingest_log)
  and projected (as `tlxdb import`);
- the p50 of one durable append: RunLog.append of one event (write + fsync), and Store.ingest of
  one event (lock, DuckDB transaction, checkpoint);
- on a store holding 1M candidates and 10M samples (generated in SQL, see
  store_bench_big_store.sql): the p50 of the dedup lookup (queries.lookups.find_measured, hits
  and misses) and of the prompt context (lookups.prompt_context, which the loop's
  fetch_shared calls; also as three separate calls), through one Store object as the loop
  makes them (its replica current: nothing written since); the same lookups right after
  another Store ingested a candidate (the replica's refresh included); the replica's build
  time (the first lookup of a process) and memory; the nearest history of one run
  (lookups.nearest_configs, read once a run: every generated run has the same kernel, so each
  of the others is a run it may draw from), the median of several calls; the final
  revalidations of one measurement identity (lookups.revalidations, read once a run);
- the time to replay a 1,000-candidate run: fold(store.run_envelopes(run)) on the big store.

Usage: python benchmarks/store_bench.py [--scale 1.0] [--workdir DIR] [--out benchmarks/results]
(--scale 0.01 is a quick smoke run; the committed results are --scale 1.0.)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pyarrow
import pydantic

from queries import lookups
from queries.replica import replica_of
from tlxstore.events import Envelope, Event, Outcome, new_event_id
from tlxstore.fold import fold
from tlxstore.runlog import RunLog, read_envelopes
from tlxstore.store import Store
from tlxstore.store.sql import store_sql
from tlxstore.testing import candidate_events, run_started

HERE = Path(__file__).resolve().parent
TARGETS = {
    "ingest_events_per_s": (">=", 100_000),
    "dedup_lookup_p50_ms": ("<=", 5.0),
    "context_query_p50_ms": ("<=", 50.0),
    "replay_1000_candidates_s": ("<=", 1.0),
}


# Store.last_ingest's parts (tlxstore.store.ingest.IngestTimings), reported per batch size
INGEST_PARTS = ("table_ms", "lock_attach_ms", "sql_ms", "project_ms", "commit_ms", "release_ms")


def host() -> dict[str, object]:
    """Where and when a store benchmark ran: the date, the machine, its CPUs, Python and DuckDB
    (the head of store_threads.py's and upgrade_bench.py's results)."""
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": platform.node(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "duckdb": duckdb.__version__,
    }


def p50(values: list[float]) -> float:
    return statistics.median(values)


def mixed_events(n: int, tag: str) -> list[Event]:
    """n events as the loop emits them: per candidate a source, proposal, build, 2 cases x
    (verify, 10 samples, profile), decision and (if rejected) an exclusion."""
    out: list[Event] = []
    i = 0
    while len(out) < n:
        out += candidate_events(
            f"c{i:05d}",
            f"def kernel(): return {i}  # {tag}",
            samples=10,
            base_us=100.0 - (i % 7),
            outcome=Outcome.REJECTED if i % 3 else Outcome.PROMOTED,
            knobs={"BLOCK": 64 * (1 + i % 8), "num_warps": 4},
        )
        i += 1
    return out[:n]


def envelopes(run_id: str, events: list[Event], start: int = 0) -> list[Envelope]:
    now = datetime.now(UTC)
    return [
        Envelope(event_id=new_event_id(), run_id=run_id, seq=start + i, recorded_at=now, event=e)
        for i, e in enumerate(events)
    ]


def bench_ingest(store: Store, batches: int, batch_size: int, tag: str) -> dict[str, float]:
    """Events/s of Store.ingest over `batches` batches (one new run each, as a loop appends), then
    the projection pass that the next read runs for them (Store.project), timed on its own and
    counted into a second rate: what the batches cost until the views show them."""
    rates = []
    total_s = 0.0
    parts: dict[str, list[float]] = {}
    for b in range(batches):
        envs = envelopes(
            f"ingest-{tag}-{b}", [run_started(), *mixed_events(batch_size - 1, f"{tag}{b}")]
        )
        t0 = time.perf_counter()
        added = store.ingest(envs)
        dt = time.perf_counter() - t0
        assert added == len(envs) and store.last_ingest is not None
        rates.append(len(envs) / dt)
        total_s += dt
        for part in INGEST_PARTS:
            parts.setdefault(part, []).append(getattr(store.last_ingest, part))
    t0 = time.perf_counter()
    projected = store.project()
    pass_s = time.perf_counter() - t0
    assert store.projection_lag() == 0
    return {
        "batches": batches,
        "batch_size": batch_size,
        "events_per_s_p50": p50(rates),
        "events_per_s_total": batches * batch_size / total_s,
        "pass_events": projected,
        "pass_s": pass_s,
        "events_per_s_with_pass": batches * batch_size / (total_s + pass_s),
        **{f"{part}_p50": p50(values) for part, values in parts.items()},
    }


def bench_runlog(folder: Path, batches: int, batch_size: int) -> dict[str, float]:
    log = RunLog.create(folder / "batched", "bench-log")
    rates = []
    for b in range(batches):
        events = mixed_events(batch_size, f"log{b}")
        t0 = time.perf_counter()
        log.append(events)
        rates.append(batch_size / (time.perf_counter() - t0))
    one = RunLog.create(folder / "single", "bench-one")
    ev = mixed_events(1, "one")
    lat = []
    for _ in range(200):
        t0 = time.perf_counter()
        one.append(ev)
        lat.append((time.perf_counter() - t0) * 1000)
    return {"batched_events_per_s_p50": p50(rates), "one_event_durable_append_p50_ms": p50(lat)}


def bench_log_ingest(folder: Path, store: Store, events: int) -> dict[str, float]:
    """A whole run log as `tlxdb import` takes it: the log written by RunLog.append in 10k-event
    batches, read back (read_envelopes: parse, check, decode), and Store.ingest_log of it end to
    end (read + one ingest)."""
    log = RunLog.create(folder / "whole", "bench-whole-log")
    log.append([run_started()])
    while log.next_seq < events:
        log.append(mixed_events(min(10_000, events - log.next_seq), f"w{log.next_seq}"))
    t0 = time.perf_counter()
    envs = read_envelopes(log.path)
    read_s = time.perf_counter() - t0
    assert len(envs) == events
    t0 = time.perf_counter()
    added = store.ingest_log(log.path)
    ingest_s = time.perf_counter() - t0
    assert added == events
    t0 = time.perf_counter()
    store.project()  # as `tlxdb import` does after its ingest
    pass_s = time.perf_counter() - t0
    return {
        "events": events,
        "read_events_per_s": events / read_s,
        "ingest_log_events_per_s": events / ingest_s,
        "pass_s": pass_s,
        "import_events_per_s": events / (ingest_s + pass_s),
        **{f"{part}_p50": getattr(store.last_ingest, part) for part in INGEST_PARTS},
    }


def bench_one_event_ingest(store: Store, n: int = 50) -> float:
    run = f"one-{uuid.uuid4().hex[:6]}"
    lat = []
    for i, env in enumerate(envelopes(run, mixed_events(n, "single"))):
        t0 = time.perf_counter()
        store.ingest([env])
        lat.append((time.perf_counter() - t0) * 1000)
        assert i == env.seq
    return p50(lat)


def bench_candidate_ingest(store: Store, n: int = 24) -> dict[str, float]:
    """Ingests as the loop's store link makes them: one candidate (source, proposal, build, two
    cases of verify/samples/profile, decision, exclusion: 11 events) per call."""
    run = f"loop-{uuid.uuid4().hex[:6]}"
    store.ingest(envelopes(run, [run_started()]))
    seq, lat = 1, []
    for i in range(n):
        events = candidate_events(f"c{i:03d}", f"def k(): return {i}  # {run}", samples=10)
        envs = envelopes(run, events, start=seq)
        seq += len(events)
        t0 = time.perf_counter()
        store.ingest(envs)
        lat.append((time.perf_counter() - t0) * 1000)
    return {"p50_ms": p50(lat), "max_ms": max(lat), "ingests": n}


def generate_big_store(path: Path, runs: int, cands: int, keys: int) -> dict[str, float]:
    Store(path)  # the schema, as tlxdb creates it
    t0 = time.perf_counter()
    con = duckdb.connect(str(path))
    con.execute(store_sql("macros"))
    con.execute(
        f"SET VARIABLE runs = {runs}; SET VARIABLE cands = {cands}; SET VARIABLE keys = {keys};"
    )
    con.execute("BEGIN")
    con.execute((HERE / "store_bench_big_store.sql").read_text())
    con.execute("COMMIT")
    counts = {
        t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]  # type: ignore[index]
        for t in ("events", "proj_candidates", "proj_samples", "proj_exclusions", "proj_sources")
    }
    con.close()
    return {
        "generate_s": time.perf_counter() - t0,
        **{f"rows_{k}": v for k, v in counts.items()},
        "size_bytes": path.stat().st_size,
    }


def bench_lookups(
    store: Store, runs: int, cands: int, keys: int, calls: int = 100
) -> dict[str, float]:
    import hashlib

    def sha(s: str) -> str:
        return "sha256:" + hashlib.sha256(s.encode()).hexdigest()

    rng = random.Random(7)
    hit, miss, ctx, one_visit = [], [], [], []
    parts: dict[str, list[float]] = {"measured": [], "exclusions": [], "prior_best": []}
    found = 0
    for _ in range(calls):
        r, c = rng.randrange(runs), rng.randrange(cands)
        mk = sha(f"key{r % keys}")
        t0 = time.perf_counter()
        m = lookups.find_measured(store, mk, sha(f"src:{r}:{c}"), sha(f"norm:{r}:{c}"))
        hit.append((time.perf_counter() - t0) * 1000)
        found += m is not None
        t0 = time.perf_counter()
        assert lookups.find_measured(store, mk, sha(f"new:{r}:{c}"), sha(f"newn:{r}:{c}")) is None
        miss.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        measured = lookups.measured_candidates(store, mk)
        t1 = time.perf_counter()
        excl = lookups.exclusions(store, sha(f"bundle{r % keys}"), "NVIDIA H200")
        t2 = time.perf_counter()
        best = lookups.prior_best(store, mk, f"rb{r:07d}")
        t3 = time.perf_counter()
        ctx.append((t3 - t0) * 1000)
        parts["measured"].append((t1 - t0) * 1000)
        parts["exclusions"].append((t2 - t1) * 1000)
        parts["prior_best"].append((t3 - t2) * 1000)
        assert measured and excl and best is not None
        t0 = time.perf_counter()
        together = lookups.prompt_context(
            store, mk, sha(f"bundle{r % keys}"), "NVIDIA H200", f"rb{r:07d}"
        )
        one_visit.append((time.perf_counter() - t0) * 1000)
        assert together == (measured, excl, best)
    return {
        "dedup_lookup_hit_p50_ms": p50(hit),
        "dedup_lookup_miss_p50_ms": p50(miss),
        "dedup_lookup_p50_ms": p50(hit + miss),
        "dedup_hits_found": found,
        "context_query_p50_ms": p50(one_visit),
        "context_three_calls_p50_ms": p50(ctx),
        "context_measured_candidates_p50_ms": p50(parts["measured"]),
        "context_exclusions_p50_ms": p50(parts["exclusions"]),
        "context_prior_best_p50_ms": p50(parts["prior_best"]),
        "context_rows_measured": len(measured),
        "calls": calls,
    }


def bench_nearest(store: Store, run_id: str, calls: int = 5) -> dict[str, float]:
    """The nearest history of one run as the loop reads it once a run (lookups.nearest_configs:
    the configurations other runs promoted for its kernel, top 10), `calls` times; every
    generated run has the same kernel and architecture family, so each of the others is a
    candidate source of its history."""
    lat, cpu = [], []
    for _ in range(calls):
        c0, t0 = time.process_time(), time.perf_counter()
        nearest = lookups.nearest_configs(store, run_id)
        lat.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
        assert nearest, "every generated run has a nearest history"
    return {
        "p50_ms": p50(lat),
        "first_ms": lat[0],  # what a run pays: it reads its nearest history once
        "max_ms": max(lat),
        # CPU time of the process (DuckDB's threads with it): on a shared VM the wall time
        # counts the other workers too
        "cpu_p50_ms": p50(cpu),
        "calls": calls,
        "rows": len(nearest),
    }


def bench_revalidations(store: Store, keys: int, calls: int = 20) -> dict[str, float]:
    """The final revalidations of one measurement identity, as the loop reads them once a run
    (lookups.revalidations over the view source_measurements), for `calls` keys in turn."""
    import hashlib

    lat, found = [], 0
    for i in range(calls):
        key = "sha256:" + hashlib.sha256(f"key{i % keys}".encode()).hexdigest()
        t0 = time.perf_counter()
        rows = lookups.revalidations(store, key)
        lat.append((time.perf_counter() - t0) * 1000)
        found += sum(len(v) for v in rows.values())
    assert found, "the generated runs that promoted were revalidated"
    return {"p50_ms": p50(lat), "max_ms": max(lat), "calls": calls, "rows_per_call": found / calls}


def bench_lookups_after_write(
    store: Store, writer: Store, keys: int, calls: int = 30
) -> dict[str, float]:
    """What the loop pays per candidate: another Store (as the loop's own writer, or another
    process) ingests one candidate's events, so the generation moves and the next lookups
    refresh the replica (one visit to the store, reading the rows appended since); then the
    dedup lookup of a new source and the prompt context, as the loop makes them."""
    import hashlib

    def sha(s: str) -> str:
        return "sha256:" + hashlib.sha256(s.encode()).hexdigest()

    run = f"after-write-{uuid.uuid4().hex[:6]}"
    mk = sha("key0")
    writer.ingest(envelopes(run, [run_started(measurement_key=mk)]))
    seq = 1
    dedup, ctx = [], []
    for i in range(calls):
        events = candidate_events(f"w{i:04d}", f"def k(): return {i}  # {run}", samples=10)
        writer.ingest(envelopes(run, events, start=seq))
        seq += len(events)
        t0 = time.perf_counter()
        assert (
            lookups.find_measured(store, mk, sha(f"fresh{run}{i}"), sha(f"freshn{run}{i}")) is None
        )
        t1 = time.perf_counter()
        lookups.prompt_context(store, mk, sha(f"bundle{i % keys}"), "NVIDIA H200", run)
        t2 = time.perf_counter()
        dedup.append((t1 - t0) * 1000)
        ctx.append((t2 - t1) * 1000)
    return {"dedup_after_write_p50_ms": p50(dedup), "context_after_refresh_p50_ms": p50(ctx)}


def bench_open_close(store: Store, n: int = 50) -> float:
    """What every store call pays before its SQL: lock, open read-only, close."""
    lat = []
    for _ in range(n):
        t0 = time.perf_counter()
        store.query("SELECT 1")
        lat.append((time.perf_counter() - t0) * 1000)
    return p50(lat)


def bench_replay(store: Store, n_candidates: int = 1000) -> dict[str, float]:
    events: list[Event] = [run_started()]
    for i in range(n_candidates + 1):
        cid = "baseline" if i == 0 else f"c{i:04d}"
        events += candidate_events(
            cid, f"def k(): return {i}", samples=10, outcome=Outcome.REJECTED
        )
    envs = envelopes("replay-1000", events)
    for start in range(0, len(envs), 5000):
        store.ingest(envs[start : start + 5000])
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        state = fold(store.run_envelopes("replay-1000"))
        times.append(time.perf_counter() - t0)
    assert len(state.candidates) == n_candidates + 1
    return {"replay_1000_candidates_s": p50(times), "replay_events": len(envs)}


def _rss_bytes() -> int:
    """This process's resident memory (Linux), for the replica's footprint."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--scale", type=float, default=1.0, help="fraction of 1M candidates / 10M samples"
    )
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=HERE / "results")
    ap.add_argument(
        "--label", default="", help="where this ran (machine), recorded with the results"
    )
    ap.add_argument(
        "--load", default="", help="how loaded the machine was (recorded with the results)"
    )
    args = ap.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="store-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    runs, cands, keys = max(10, int(10_000 * args.scale)), 100, max(1, int(1_000 * args.scale))

    res: dict[str, object] = {
        **host(),
        "machine": args.label or platform.node(),
        "platform": platform.platform(),
        "pyarrow": pyarrow.__version__,
        "pydantic": pydantic.VERSION,
        "scale": args.scale,
        "load": args.load,
        "loadavg_at_start": os.getloadavg(),
    }
    empty = Store(work / "empty.duckdb")
    res["ingest_empty_store"] = bench_ingest(empty, batches=16, batch_size=10_000, tag="e")
    res["ingest_empty_store_50k"] = bench_ingest(empty, batches=3, batch_size=50_000, tag="f")
    res["ingest_empty_store_100k"] = bench_ingest(empty, batches=3, batch_size=100_000, tag="g")
    res["one_event_ingest_p50_ms"] = bench_one_event_ingest(empty)
    res["runlog"] = bench_runlog(work, batches=5, batch_size=10_000)
    res["log_ingest"] = bench_log_ingest(work, Store(work / "logs.duckdb"), events=100_000)
    big_path = work / "big.duckdb"
    res["big_store"] = generate_big_store(big_path, runs, cands, keys)
    big = Store(big_path)
    generated = fold(big.run_envelopes("rb0000001"))  # generated events are valid events
    assert len(generated.candidates) == cands and generated.started is not None
    res["open_close_p50_ms"] = bench_open_close(big)
    t0 = time.perf_counter()
    lookups.find_measured(big, "sha256:none", "sha256:none", "sha256:none")
    res["replica_build_s"] = time.perf_counter() - t0  # first lookup of a process
    res["lookups"] = bench_lookups(big, runs, cands, keys)
    res["lookups_after_write"] = bench_lookups_after_write(big, Store(big_path), keys)
    res["nearest"] = {**bench_nearest(big, f"rb{runs // 2:07d}"), "runs": runs}
    res["revalidations"] = bench_revalidations(big, keys)
    res["rss_after_lookups_bytes"] = _rss_bytes()
    res["replica_bytes"] = replica_of(big).nbytes()
    res["replay"] = bench_replay(big)
    res["candidate_ingest_big_store"] = bench_candidate_ingest(big)
    res["ingest_big_store"] = bench_ingest(big, batches=3, batch_size=10_000, tag="b")
    summary = {
        "ingest_events_per_s": res["ingest_empty_store"]["events_per_s_total"],  # type: ignore[index]
        "dedup_lookup_p50_ms": res["lookups"]["dedup_lookup_p50_ms"],  # type: ignore[index]
        "context_query_p50_ms": res["lookups"]["context_query_p50_ms"],  # type: ignore[index]
        "replay_1000_candidates_s": res["replay"]["replay_1000_candidates_s"],  # type: ignore[index]
    }
    res["targets"] = {
        k: {"value": v, "target": f"{op} {t}", "met": (v >= t if op == ">=" else v <= t)}
        for k, v in summary.items()
        for op, t in [TARGETS[k]]
    }
    args.out.mkdir(parents=True, exist_ok=True)
    suffix = "" if args.scale == 1.0 else f".scale{args.scale:g}"
    (args.out / f"store_bench{suffix}.json").write_text(json.dumps(res, indent=2) + "\n")
    (args.out / f"store_bench{suffix}.md").write_text(render(res))
    print(json.dumps(res["targets"], indent=2))


def _rate(ingest: dict) -> str:
    return (
        f"{ingest['events_per_s_total']:,.0f} events/s over all {ingest['batches']} batches "
        f"(p50 of the batches {ingest['events_per_s_p50']:,.0f}); with the projection pass after "
        f"them ({ingest['pass_s']:.2f} s for {ingest['pass_events']:,} events): "
        f"{ingest['events_per_s_with_pass']:,.0f}"
    )


def _split(ingest: dict) -> str:
    if "table_ms_p50" not in ingest:
        return "not measured"
    return " / ".join(f"{ingest[f'{part}_p50']:.0f}" for part in INGEST_PARTS) + " ms"


def render(res: dict) -> str:
    lk, big = res["lookups"], res["big_store"]
    rows = [
        (
            "batched ingest, empty store (Store.ingest, 16 batches of 10k events: each appends "
            "its events and leaves their projections to the next read, whose pass merges row groups)",
            _rate(res["ingest_empty_store"]),
        ),
        (
            "  where one 10k-event ingest goes, p50: Arrow table in Python / lock + attach / "
            "SQL (checks, append) / projection in the ingest (small batches only) / COMMIT "
            "(checkpoint included) / detach + unlock",
            _split(res["ingest_empty_store"]),
        ),
        (
            "batched ingest, empty store, 50k-event batches",
            _rate(res["ingest_empty_store_50k"]),
        ),
        (
            "  where one 50k-event ingest goes, p50 (same parts)",
            _split(res["ingest_empty_store_50k"]),
        ),
        (
            "batched ingest, empty store, 100k-event batches",
            _rate(res["ingest_empty_store_100k"]),
        ),
        (
            "  where one 100k-event ingest goes, p50 (same parts)",
            _split(res["ingest_empty_store_100k"]),
        ),
        (
            f"a whole run log of {res['log_ingest']['events']:,} events: read back "
            "(read_envelopes) / Store.ingest_log end to end (read + one ingest) / as `tlxdb "
            "import` (ingest_log, then the projection pass)",
            f"{res['log_ingest']['read_events_per_s']:,.0f} / "
            f"{res['log_ingest']['ingest_log_events_per_s']:,.0f} / "
            f"{res['log_ingest']['import_events_per_s']:,.0f} events/s",
        ),
        (
            "  where its one ingest goes (same parts)",
            _split(res["log_ingest"]),
        ),
        (
            "batched ingest, big store (10k-event batches)",
            _rate(res["ingest_big_store"]),
        ),
        (
            "  where one 10k-event ingest into the big store goes, p50",
            _split(res["ingest_big_store"]),
        ),
        (
            "batched run-log append (RunLog.append, 10k-event batches)",
            f"{res['runlog']['batched_events_per_s_p50']:,.0f} events/s",
        ),
        (
            "one durable append, run log (write + fsync), p50",
            f"{res['runlog']['one_event_durable_append_p50_ms']:.2f} ms",
        ),
        (
            "one event into the store (lock, transaction, checkpoint), p50",
            f"{res['one_event_ingest_p50_ms']:.1f} ms",
        ),
        (
            "one candidate (11 events) into the big store, as the loop ingests, p50 (max of "
            f"{res['candidate_ingest_big_store']['ingests']})",
            f"{res['candidate_ingest_big_store']['p50_ms']:.1f} ms "
            f"({res['candidate_ingest_big_store']['max_ms']:.0f} ms)",
        ),
        (
            "lock + open + close of the big store (every call pays it), p50",
            f"{res['open_close_p50_ms']:.1f} ms",
        ),
        (
            "dedup lookup find_measured, p50 (hits / misses)",
            f"{lk['dedup_lookup_p50_ms']:.1f} ms ({lk['dedup_lookup_hit_p50_ms']:.1f} / {lk['dedup_lookup_miss_p50_ms']:.1f})",
        ),
        (
            "prompt context in one visit (lookups.prompt_context), p50",
            f"{lk['context_query_p50_ms']:.1f} ms",
        ),
        (
            "prompt context as three calls (measured + exclusions + prior best), p50",
            f"{lk['context_three_calls_p50_ms']:.1f} ms ({lk['context_measured_candidates_p50_ms']:.1f} + {lk['context_exclusions_p50_ms']:.1f} + {lk['context_prior_best_p50_ms']:.1f})",
        ),
        (
            "dedup lookup right after another Store's ingest (replica refresh: one store visit), p50",
            f"{res['lookups_after_write']['dedup_after_write_p50_ms']:.1f} ms",
        ),
        (
            "prompt context right after that refresh, p50",
            f"{res['lookups_after_write']['context_after_refresh_p50_ms']:.1f} ms",
        ),
        (
            f"nearest history of one run (lookups.nearest_configs, top 10 of the "
            f"{res['nearest']['runs'] - 1:,} other runs of its kernel), p50 of "
            f"{res['nearest']['calls']} (the first call; the slowest; CPU time, p50)",
            f"{res['nearest']['p50_ms']:.0f} ms ({res['nearest']['first_ms']:.0f} ms; "
            f"{res['nearest']['max_ms']:.0f} ms; {res['nearest']['cpu_p50_ms']:.0f} ms)",
        ),
        (
            "final revalidations of one measurement identity (lookups.revalidations, read once "
            "a run), p50 (the slowest; rows a call)",
            f"{res['revalidations']['p50_ms']:.1f} ms ({res['revalidations']['max_ms']:.1f} ms; "
            f"{res['revalidations']['rows_per_call']:.0f})",
        ),
        (
            "first lookup of a process (builds the replica from the store)",
            f"{res['replica_build_s']:.2f} s",
        ),
        (
            "memory of the replica's rows (Arrow buffers, decisions + exclusions)",
            f"{res['replica_bytes'] / 1e6:,.0f} MB",
        ),
        (
            "resident memory of the bench process after the lookups (replica included)",
            f"{res['rss_after_lookups_bytes'] / 1e6:,.0f} MB",
        ),
        (
            "replay of a 1,000-candidate run (run_envelopes + fold), p50",
            f"{res['replay']['replay_1000_candidates_s']:.2f} s ({res['replay']['replay_events']:,} events)",
        ),
    ]
    lines = [
        "# Store benchmark",
        "",
        f"Machine: {res['machine']} ({res['cpu_count']} CPUs, {res['platform']}); Python {res['python']}, "
        f"DuckDB {res['duckdb']}, pyarrow {res['pyarrow']}, pydantic {res['pydantic']}; {res['date']}.",
        f"Load: {res.get('load') or 'not recorded'}; load average at start "
        f"{', '.join(f'{x:.2f}' for x in res.get('loadavg_at_start', ()))}.",
        f"Big store: {big['rows_proj_candidates']:,} candidates, {big['rows_proj_samples']:,} samples, "
        f"{big['rows_events']:,} events, {big['size_bytes'] / 1e9:.2f} GB, generated in SQL in {big['generate_s']:.0f} s.",
        "",
        "| measurement | result |",
        "|---|---|",
        *[f"| {a} | {b} |" for a, b in rows],
        "",
        "The ingest target is checked against the append rate over all 16 batches of 10k events "
        "(Store.ingest: checks, the events, their run heads; durable at COMMIT). The projections "
        "(proj_* tables the views read) are not written by a batch this large: the next read "
        "projects every batch since the last in one pass, which also merges row groups. The "
        "rate with that pass counted is beside it in the table, and is the cost of an import "
        "until its views show it.",
        "",
        "| target | value | met |",
        "|---|---|---|",
        *[
            f"| {k} {v['target']} | {v['value']:,.3g} | {'yes' if v['met'] else 'NO'} |"
            for k, v in res["targets"].items()
        ],
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
