"""kill -9 of a writer at random moments, over and over: nothing acknowledged is lost, no partial
batch is ever visible, and the next writer picks up where the log and the store stand.

Writers are forked from the test process (the libraries are already imported), so a hundred
kills take seconds. Each writer resumes the same run: opens the log, catches the store up from
it, then appends batches of random size to the log (the acknowledgment point) and ingests each
into the store. The killer aims at three kinds of moment: anywhere, inside a log append (between
validation and fsync), and inside a store ingest (inside the DuckDB transaction).
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections import Counter
from multiprocessing.sharedctypes import RawValue

from tlxstore.events import BuildFinished
from tlxstore.runlog import RunLog, read_envelopes
from tlxstore.store import Store

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
