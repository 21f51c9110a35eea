"""A reader never ends a writer (D1), through real processes: a `tlxdb query` that runs long is
stopped at its time limit, and a `tlxdb optimize` beside one that holds the store past the lock
timeout goes on on its run log and leaves the store to catch up."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from support.bundles import kernel_copy, sleep_bundle
from support.cli import TLXDB, small_optimize

from tlxstore.locking import lock_path
from tlxstore.runlog import RunLog
from tlxstore.store import Store
from tlxstore.testing import small_run

# counts to 10**13: a query that would run for hours, in constant memory
ENDLESS = "SELECT count(*) AS n FROM range(10000000000000)"


def _store_with_a_run(tmp: Path) -> Path:
    RunLog.create(tmp / "r1", "r1").append(small_run(1))
    store = tmp / "s.duckdb"
    Store(store).ingest_log(tmp / "r1")
    return store


def test_a_query_past_its_time_limit_is_stopped_in_one_line(tmp_path):
    store = _store_with_a_run(tmp_path)
    started = time.monotonic()
    proc = subprocess.run(
        [TLXDB, "query", ENDLESS, "--timeout", "1", "--store", str(store)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.splitlines() == [
        "Error: the query ran past its time limit of 1 s and was stopped; give it more with "
        "--timeout"
    ]
    assert time.monotonic() - started < 60
    assert _held(store) is False  # the lock went with it


def _held(store: Path) -> bool:
    """Whether some process holds the store's lock now (shared or exclusive)."""
    fd = os.open(lock_path(store), os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _wait(what, timeout_s: float, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while not what():
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"tlxdb optimize ended early: {proc.communicate()}")
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.1)


@pytest.mark.slow
def test_a_long_query_beside_a_run_never_ends_it(tmp_path):
    """D1: the run beside a query holding the store stopped with "run finished: error — store
    ... stayed locked", its events only in its log, and --resume said "already finished"."""
    store, out, gate = tmp_path / "s.duckdb", tmp_path / "out", tmp_path / "gate"
    env = {
        **os.environ,
        "TLXDB_LOCK_TIMEOUT_S": "1",
        "SLEEP_HARNESS_GATE": str(gate),  # every candidate's benchmark waits for the gate
        "SLEEP_HARNESS_GATED": "16,32,128,256,512,1024,2048,4096",
    }
    args = small_optimize(
        kernel_copy(tmp_path / "src"), sleep_bundle(tmp_path / "bundle", sleep_s=0), store, out
    )
    run = subprocess.Popen(
        [TLXDB, *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    query = None
    try:
        log = out / "events.jsonl"
        _wait(lambda: log.exists() and '"candidate_id":"c001"' in log.read_text(), 300, run)
        query = subprocess.Popen(
            [TLXDB, "query", ENDLESS, "--timeout", "600", "--store", str(store)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        _wait(lambda: _held(store), 60)
        gate.touch()  # the run goes on while the query holds the store
        stdout, stderr = run.communicate(timeout=300)
        assert query.poll() is None  # the query held the store to the end of the run
    finally:
        for proc in (run, query):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    assert run.returncode in (0, 2), stderr
    result = json.loads(stdout)
    assert result["stopping_reason"] == "max_rounds"
    notes = [line for line in stderr.splitlines() if line.startswith("note: store")]
    assert len(notes) == 1 and "stayed busy" in notes[0]
    assert notes[0].endswith(f"are in its log only: add them with `tlxdb import {out}`")
    imported = subprocess.run(
        [TLXDB, "import", str(out), "--store", str(store)], capture_output=True, text=True
    )
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout)["added"] > 0
    runs = subprocess.run(
        [TLXDB, "runs", "--store", str(store), "--format", "json"], capture_output=True, text=True
    )
    (row,) = json.loads(runs.stdout)
    assert (row["run_id"], row["status"]) == (result["run_id"], "finished")
