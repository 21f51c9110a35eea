"""A run cut off loses nothing, through real processes: a file-size limit (RLIMIT_FSIZE, with
SIGXFSZ ignored, as a full disk fails a write) reached by the store during `tlxdb optimize` stops
the run as interrupted with one line saying so, and `--resume` (with room again) finishes it (D2);
an output folder a validation killed by kill -9 left half made is reused by the next run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.bundles import kernel_copy, sleep_bundle
from support.cli import TLXDB, small_optimize

FIXTURE = Path(__file__).parent.parent / "importers" / "fixtures" / "tlx_run"
# the limit applies to every file this process writes: the store's file may grow by this much
LIMITED = """
import os, resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
os.execv(sys.argv[2], sys.argv[2:])
"""


def tlxdb(*args: str, fsize: int | None = None) -> subprocess.CompletedProcess:
    limit = [] if fsize is None else [sys.executable, "-c", LIMITED, str(fsize)]
    return subprocess.run([*limit, TLXDB, *args], capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_a_full_disk_during_a_run_stops_it_resumable_in_one_line(tmp_path):
    store, out = tmp_path / "s.duckdb", tmp_path / "out"
    assert tlxdb("import", str(FIXTURE), "--store", str(store)).returncode == 0
    common = ["--store", str(store)]
    args = small_optimize(
        kernel_copy(tmp_path / "src"), sleep_bundle(tmp_path / "bundle", sleep_s=0), store, out
    )
    run = tlxdb(
        *args,
        fsize=store.stat().st_size + 16 * 1024,
    )
    assert run.returncode == 130, run.stderr
    assert "Traceback" not in run.stderr
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith(f"Error: the disk is full writing store {store} (File too large): run ")
    assert last.endswith(
        f"stopped as interrupted; free space and continue it with `tlxdb optimize --resume {out}`"
    )
    resumed = tlxdb("optimize", "--resume", str(out), *common)
    assert resumed.returncode in (0, 2), resumed.stderr
    assert json.loads(resumed.stdout)["stopping_reason"] == "max_rounds"
    runs = json.loads(tlxdb("runs", *common, "--format", "json").stdout)
    assert {r["status"] for r in runs} == {"finished"} and len(runs) == 2


def test_an_import_on_a_full_disk_is_one_line_and_the_store_works_with_room_again(tmp_path):
    store = tmp_path / "s.duckdb"
    full = tlxdb("import", str(FIXTURE), "--store", str(store), fsize=200_000)
    assert full.returncode == 1 and full.stderr.splitlines() == [
        f"Error: the disk is full writing store {store} (File too large)"
    ]
    assert tlxdb("import", str(FIXTURE), "--store", str(store)).returncode == 0
    assert len(json.loads(tlxdb("runs", "--store", str(store), "--format", "json").stdout)) == 1


@pytest.mark.slow
def test_an_output_folder_a_killed_validation_left_is_reused_by_the_next_run(tmp_path):
    """A kill -9 during validation left a half-made --output-dir (the baseline's artifacts)
    that blocked its reuse ("output folder ... is not empty")."""
    store, out, gate = tmp_path / "s.duckdb", tmp_path / "out", tmp_path / "gate"
    args = small_optimize(
        kernel_copy(tmp_path / "src"), sleep_bundle(tmp_path / "bundle", sleep_s=0), store, out
    )
    # the baseline's benchmark (BLOCK_SIZE 64) waits for the gate: validation is in flight
    env = {**os.environ, "SLEEP_HARNESS_GATE": str(gate), "SLEEP_HARNESS_GATED": "64"}
    first = subprocess.Popen(
        [TLXDB, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 300
        while not (out / "experiments").is_dir():
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.1)
        time.sleep(0.5)
    finally:
        first.kill()
        first.communicate()
        gate.touch()  # its harness child (a process group of its own) finishes and exits
    assert any(out.iterdir()) and not (out / "events.jsonl").exists()
    second = tlxdb(*args)
    assert second.returncode in (0, 2), second.stderr
    assert json.loads(second.stdout)["stopping_reason"] == "max_rounds"
    assert not (out / ".validating").exists()


def test_an_output_folder_a_live_validation_holds_is_not_taken(tmp_path):
    """The same folder while a validation (of another process) holds it: refused, untouched."""
    out = tmp_path / "out"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(out)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        args = small_optimize(
            kernel_copy(tmp_path / "src"),
            sleep_bundle(tmp_path / "bundle"),
            tmp_path / "s.duckdb",
            out,
        )
        r = tlxdb(*args)
        assert r.returncode == 1
        assert r.stderr.strip().splitlines()[-1] == (
            f"Error: output folder {out} is not empty; choose another --output-dir"
        )
        assert (out / "experiments" / "baseline" / "mine").exists()
    finally:
        holder.kill()
        holder.wait()


HOLD = """
import sys, time
from pathlib import Path
from optimizer.run.lease import validation_claim
out = Path(sys.argv[1])
with validation_claim(out):
    (out / "experiments" / "baseline").mkdir(parents=True)
    (out / "experiments" / "baseline" / "mine").write_text("in use")
    print("holding", flush=True)
    time.sleep(600)
"""
