"""kill -9 of a writer at random moments, over and over: nothing acknowledged is lost, no partial
batch is ever visible, and the next writer picks up where the log and the store stand. And kill -9
of a projection pass (the catch-up a read runs after large ingests): only whole transactions of it
are ever visible, and the next reader finishes it with the same rows as an uninterrupted pass.

Writers are forked from the test process (the libraries are already imported), so a hundred
kills take seconds. Each writer resumes the same run: opens the log, catches the store up from
it, then appends batches of random size to the log (the acknowledgment point) and ingests each
into the store. The killer aims at three kinds of moment: anywhere, inside a log append (between
validation and fsync), and inside a store ingest (inside the DuckDB transaction).
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import time
from collections import Counter
from multiprocessing.sharedctypes import RawValue

import duckdb

import tlxstore.store.projection
from tlxstore.conformance import PROJECTIONS
from tlxstore.events import BuildFinished
from tlxstore.runlog import RunLog, read_envelopes
from tlxstore.store import Store
from tlxstore.testing import envelopes, leave_behind, small_run

KILLS = 120
IDLE, APPENDING, INGESTING = 0, 1, 2
RUN_ID = "r-kill9"


def _writer(out, store_path, seed, phase, log_acked, store_acked) -> None:
    rng = random.Random(seed)
    store = Store(store_path)
    log = RunLog.open(out, run_id=RUN_ID)
    phase.value = INGESTING
    store.ingest_log(out)
    phase.value = IDLE
    batch = 0
    while True:
        n = rng.randint(1, 60)
        events = [
            BuildFinished(
                candidate_id=f"{seed}:{batch}:{i}/{n}", success=True, duration_ms=float(i)
            )
            for i in range(n)
        ]
        phase.value = APPENDING
        envs = log.append(events)
        log_acked.value = log.next_seq
        phase.value = INGESTING
        store.ingest(envs)
        store_acked.value = envs[-1].seq + 1
        phase.value = IDLE
        batch += 1


def _whole_batches(envs) -> bool:
    """Every batch (seed:batch) present has all of its n events."""
    groups: Counter[str] = Counter()
    sizes: dict[str, int] = {}
    for e in envs:
        head, _, frac = e.event.candidate_id.rpartition(":")
        sizes[head] = int(frac.split("/")[1])
        groups[head] += 1
    return all(groups[k] == sizes[k] for k in groups)


def _wait_for(phase, wanted: int, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while phase.value != wanted:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.0002)
    return True


def test_kill_9_at_random_moments_loses_nothing_acknowledged_and_shows_no_partial_batch(tmp_path):
    out, store_path = tmp_path / "out", tmp_path / "store.duckdb"
    RunLog.create(out, RUN_ID)
    Store(store_path).close()  # no DuckDB instance (nor its threads) may live across a fork
    rng = random.Random(20261130)
    phase, log_acked, store_acked = RawValue("i", IDLE), RawValue("q", 0), RawValue("q", 0)
    killed_in: Counter[str] = Counter()
    t0 = time.monotonic()
    for k in range(KILLS):
        phase.value = IDLE
        pid = os.fork()
        if pid == 0:  # the writer: never returns
            code = 0
            try:
                _writer(out, store_path, k, phase, log_acked, store_acked)
            except BaseException:
                code = 1
            os._exit(code)
        aim = k % 3
        if aim == 1:
            _wait_for(phase, APPENDING)
        elif aim == 2:
            _wait_for(phase, INGESTING)
            time.sleep(rng.uniform(0, 0.02))
        else:
            time.sleep(rng.uniform(0, 0.15))
        at = phase.value
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status), (
            f"writer {k} ended on its own (exit {os.waitstatus_to_exitcode(status)})"
        )
        killed_in[{IDLE: "idle", APPENDING: "append", INGESTING: "ingest"}[at]] += 1

        logged = read_envelopes(out)
        assert [e.seq for e in logged] == list(range(len(logged)))
        assert len(logged) >= log_acked.value, f"kill {k}: acknowledged log events lost"
        assert _whole_batches(logged), f"kill {k}: a partial batch is visible in the log"
        if k % 4 == 0 or at == INGESTING:
            with Store(store_path) as store:
                stored = store.run_envelopes(RUN_ID)
            assert len(stored) >= store_acked.value, f"kill {k}: acknowledged store events lost"
            assert stored == logged[: len(stored)], (
                f"kill {k}: the store is not a prefix of the log"
            )
            assert _whole_batches(stored), f"kill {k}: a partial batch is visible in the store"
    elapsed = time.monotonic() - t0
    store = Store(store_path)
    store.ingest_log(out)
    final = read_envelopes(out)
    assert store.run_envelopes(RUN_ID) == final and len(final) >= log_acked.value > 0
    assert killed_in["append"] >= 20 and killed_in["ingest"] >= 30, killed_in
    print(f"{KILLS} kills in {elapsed:.1f} s ({dict(killed_in)}); {len(final)} events survived")


# ---- a projection pass killed at random moments ---------------------------------------------------

PASS_KILLS = 30
CHUNK = 400  # events per transaction of the pass, so a kill can land between its transactions
STARTING, PROJECTING = 1, 2


def _bulk_run(run_id: str) -> list:
    return envelopes(run_id, small_run(95, tag=run_id))


def _projector(store_path, phase) -> None:
    tlxstore.store.projection.PROJECT_CHUNK = CHUNK  # in the forked writer only
    store = Store(store_path)
    phase.value = PROJECTING
    store.project()


def _raw(store_path, sql: str):
    """A value read straight from the file (Store would bring the projections up to date first)."""
    con = duckdb.connect(str(store_path), read_only=True)
    try:
        return con.execute(sql).fetchone()[0]
    finally:
        con.close()


def _projected_match_events_below(store_path, done: int) -> bool:
    """The projection tables hold exactly the events below projected_pos: counted per table."""
    below = f"FROM events WHERE pos < {done}"
    pairs = (
        (
            "SELECT count(*) FROM proj_candidates",
            f"SELECT count(*) {below} AND type = 'CandidateProposed'",
        ),
        (
            "SELECT count(*) FROM proj_decisions",
            f"SELECT count(*) {below} AND type = 'DecisionMade'",
        ),
        (
            "SELECT count(*) FROM proj_samples",
            'SELECT coalesce(sum(len(from_json(payload, \'{"samples_us": "DOUBLE[]"}\').samples_us)), 0) '
            f"{below} AND type = 'BenchmarkSampled'",
        ),
    )
    return all(_raw(store_path, a) == _raw(store_path, b) for a, b in pairs)


def test_kill_9_inside_a_projection_pass_leaves_only_whole_transactions(tmp_path):
    template, reference = tmp_path / "lagging.duckdb", tmp_path / "reference.duckdb"
    events = [e for r in ("r1", "r2") for e in _bulk_run(r)]
    for path in (template, reference):
        with Store(path) as store:
            store.ingest(events)
    leave_behind(template)  # as an older tlxdb left a bulk ingest, for the pass to catch up
    with Store(reference) as store:
        want = {t: store.query(f"SELECT * FROM {t} ORDER BY ALL") for t in PROJECTIONS}
    n = len(events)
    rng = random.Random(7)
    phase = RawValue("i", IDLE)
    landed: Counter[str] = Counter()
    for k in range(PASS_KILLS):
        path = tmp_path / f"k{k}.duckdb"
        shutil.copy(template, path)
        phase.value = STARTING
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                _projector(path, phase)
            except BaseException:
                code = 1
            os._exit(code)
        _wait_for(phase, PROJECTING)
        time.sleep(rng.uniform(0, 0.25))
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        done = _raw(path, "SELECT projected_pos FROM projection_state")
        landed["before" if done == 0 else "after" if done == n else "between"] += 1
        assert done == n or done % CHUNK == 0, (
            f"kill {k}: projected_pos {done} is inside a transaction"
        )
        assert _projected_match_events_below(path, done), f"kill {k}: a partial pass is visible"
        with Store(path) as store:  # the next reader finishes the pass
            assert store.projection_lag() == n - done
            got = {t: store.query(f"SELECT * FROM {t} ORDER BY ALL") for t in PROJECTIONS}
        assert got == want, f"kill {k}: the finished pass differs from an uninterrupted one"
        path.unlink()
    assert landed["between"] >= 5, landed
    print(f"{PASS_KILLS} kills of a {n}-event pass in {CHUNK}-event transactions: {dict(landed)}")
