"""Eight writer processes share one store while `tlxdb query` reads it; nothing is lost,
duplicated or refused."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from tlxstore.store import Store

WRITER = """
import sys
from tlxstore.events import BuildFinished
from tlxstore.runlog import RunLog
from tlxstore.store import Store

store_path, out, run_id, n, batch = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
store = Store(store_path)
log = RunLog.create(out, run_id)
for start in range(0, n, batch):
    envs = log.append([BuildFinished(candidate_id=f"c{i}", success=True, duration_ms=float(i)) for i in range(start, start + batch)])
    assert store.ingest(envs) == len(envs)
"""


def _tlxdb() -> str:
    return str(Path(sys.executable).parent / "tlxdb")


def test_eight_writers_times_500_events_give_exactly_4000_with_a_reader_running(tmp_path):
    store_path = tmp_path / "store.duckdb"
    Store(store_path).close()
    t0 = time.monotonic()
    writers = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                WRITER,
                str(store_path),
                str(tmp_path / f"out{w}"),
                f"r{w}",
                "500",
                "50",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(8)
    ]
    counts = []  # `tlxdb query`, the real command, while the writers run
    while any(w.poll() is None for w in writers):
        q = subprocess.run(
            [
                _tlxdb(),
                "query",
                "SELECT count(*) AS n FROM events",
                "--store",
                str(store_path),
                "--format",
                "csv",
            ],
            capture_output=True,
            text=True,
        )
        assert q.returncode == 0 and q.stderr == "", q.stderr
        counts.append(int(q.stdout.split()[1]))
    results = [w.communicate(timeout=120) for w in writers]
    elapsed = time.monotonic() - t0
    for w, (_, err_w) in zip(writers, results, strict=True):
        assert w.returncode == 0, err_w
    assert counts and counts == sorted(counts), counts  # it saw the store grow, never shrink
    store = Store(store_path)
    rows = store.query(
        "SELECT count(*) AS n, count(DISTINCT event_id) AS ids, count(DISTINCT (run_id, seq)) AS slots FROM events"
    ).to_pylist()[0]
    assert rows == {"n": 4000, "ids": 4000, "slots": 4000}
    for w in range(8):
        assert [e.seq for e in store.run_envelopes(f"r{w}")] == list(range(500))
    print(
        f"8 writers x 500 events: {elapsed:.1f} s; {len(counts)} tlxdb queries meanwhile: {counts}"
    )
