"""Eight writer processes share one store with a reader; nothing is lost, duplicated or refused."""

from __future__ import annotations

import subprocess
import sys
import time

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

READER = """
import sys, time
from tlxstore.store import Store
store = Store(sys.argv[1])
counts = []
deadline = time.monotonic() + float(sys.argv[2])
while time.monotonic() < deadline:
    counts.append(store.query("SELECT count(*) AS n FROM events").column("n")[0].as_py())
    time.sleep(0.05)
print(len(counts), counts[0], counts[-1], all(a <= b for a, b in zip(counts, counts[1:])))
"""


def test_eight_writers_times_500_events_give_exactly_4000_with_a_reader_running(tmp_path):
    store_path = tmp_path / "store.duckdb"
    Store(store_path)
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(store_path), "6"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
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
    results = [w.communicate(timeout=120) for w in writers]
    elapsed = time.monotonic() - t0
    out, err = reader.communicate(timeout=60)
    for w, (_, err_w) in zip(writers, results, strict=True):
        assert w.returncode == 0, err_w
    assert reader.returncode == 0, err
    n_reads, _, _, monotonic = out.split()
    assert int(n_reads) > 0 and monotonic == "True"
    store = Store(store_path)
    rows = store.query(
        "SELECT count(*) AS n, count(DISTINCT event_id) AS ids, count(DISTINCT (run_id, seq)) AS slots FROM events"
    ).to_pylist()[0]
    assert rows == {"n": 4000, "ids": 4000, "slots": 4000}
    for w in range(8):
        assert [e.seq for e in store.run_envelopes(f"r{w}")] == list(range(500))
    print(f"8 writers x 500 events: {elapsed:.1f} s")
    assert elapsed < 60
