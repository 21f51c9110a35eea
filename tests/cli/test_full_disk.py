"""A full disk loses nothing (D2), through real processes: a file-size limit (RLIMIT_FSIZE, with
SIGXFSZ ignored, as a full disk fails a write) reached by the store during `tlxdb optimize` stops
the run as interrupted with one line saying so, and `--resume` (with room again) finishes it."""

from __future__ import annotations

import json
import subprocess
import sys
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
