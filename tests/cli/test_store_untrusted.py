"""The store under untrusted input and hostile surroundings, through the real CLI: events its
views cannot hold are refused with their batch (never committed unprojected), a store left
behind is caught up or reported in one line, and the store's own files are never followed
anywhere or mistaken for something else."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner
from support.cli import one_error_line

from cli.main import main
from tlxstore.events import CandidateProposed
from tlxstore.runlog import RunLog
from tlxstore.store import Store
from tlxstore.testing import leave_behind, small_run


def tlx(*args: str):
    return CliRunner().invoke(main, list(args))


def run_folder(tmp: Path, run_id: str, candidates: int, huge_round: bool = False) -> Path:
    """A tlxdb output folder (a run log) of a run with `candidates` candidates; with
    `huge_round`, every proposal's round is 2**31 (valid JSON, beyond the store's column)."""
    events = small_run(candidates)
    if huge_round:
        events = [
            e.model_copy(update={"round": 2**31}) if isinstance(e, CandidateProposed) else e
            for e in events
        ]
    RunLog.create(tmp / run_id, run_id).append(events)
    return tmp / run_id


def runs_in(store: Path) -> list[str]:
    r = tlx("runs", "--store", str(store), "--format", "json")
    assert r.exit_code == 0, r.output
    return [row["run_id"] for row in json.loads(r.stdout)]


@pytest.mark.parametrize("candidates", [95, 2], ids=["over 1000 events", "under 1000 events"])
def test_events_the_views_cannot_hold_are_refused_whole_and_the_store_still_works(
    tmp_path, candidates
):
    """C1, the store's half: whatever carries them (here a tlxdb run log), events whose
    projection fails are not committed. Over 1,000 events they used to be committed with their
    projection left to the next read, which then failed for good."""
    store = tmp_path / "s.duckdb"
    assert tlx("import", str(run_folder(tmp_path, "good", 1)), "--store", str(store)).exit_code == 0
    bad = run_folder(tmp_path, "bad", candidates, huge_round=True)
    line = one_error_line(tlx("import", str(bad), "--store", str(store)))
    assert line == (
        f"store {store} refused run bad: its events do not fit the store's views (Constraint "
        "Error: NOT NULL constraint failed: proj_candidates.round); nothing was written"
    )
    assert runs_in(store) == ["good"]
    assert Store(store).projection_lag() == 0
    r = tlx("query", "SELECT count(*) AS n FROM candidates", "--store", str(store))
    assert r.exit_code == 0, r.output


def _unprojectable(store: Path) -> None:
    """Turn one stored proposal into one the views cannot hold, and leave the store behind: what
    an older tlxdb left after a bulk ingest of such an event."""
    con = duckdb.connect(str(store))
    con.execute(
        "UPDATE events SET payload = json_merge_patch(payload, '{\"round\": 2147483648}') "
        "WHERE type = 'CandidateProposed' AND run_id = 'bad'"
    )
    con.close()
    leave_behind(store)


def test_a_store_left_behind_that_cannot_catch_up_says_so_in_one_line(tmp_path):
    store = tmp_path / "s.duckdb"
    for run_id in ("good", "bad"):
        r = tlx("import", str(run_folder(tmp_path, run_id, 1)), "--store", str(store))
        assert r.exit_code == 0, r.output
    _unprojectable(store)
    events = Store(store).event_count()
    line = one_error_line(tlx("runs", "--store", str(store)))
    assert line == (
        f"{events} events of store {store} cannot be brought into its views (Constraint Error: "
        "NOT NULL constraint failed: proj_candidates.round); the events themselves read as ever "
        "(`tlxdb export`): move the store aside and rebuild it with `tlxdb import` of your runs' "
        "output folders"
    )
    r = tlx("export", "good", "--store", str(store), "--to", str(tmp_path / "exported"))
    assert r.exit_code == 0, r.output
    assert (
        tlx("import", str(tmp_path / "exported"), "--store", str(tmp_path / "new.duckdb")).exit_code
        == 0
    )
    assert runs_in(tmp_path / "new.duckdb") == ["good"]


def test_a_store_left_behind_is_caught_up_by_the_next_command(tmp_path):
    store = tmp_path / "s.duckdb"
    assert tlx("import", str(run_folder(tmp_path, "r1", 95)), "--store", str(store)).exit_code == 0
    assert leave_behind(store) > 1000
    assert runs_in(store) == ["r1"]
    assert Store(store).projection_lag() == 0


def tlxdb_process(*args: str, timeout_s: float = 60) -> subprocess.CompletedProcess:
    """The console script in a process of its own: a hang fails the test instead of ending it."""
    return subprocess.run(
        [str(Path(sys.executable).parent / "tlxdb"), *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def test_a_fifo_as_the_store_is_refused_without_hanging(tmp_path):
    """A FIFO as the store path hung `runs` and `import`."""
    fifo = tmp_path / "store.duckdb"
    os.mkfifo(fifo)
    for args in (["runs"], ["import", str(run_folder(tmp_path, "r1", 1))]):
        proc = tlxdb_process(*args, "--store", str(fifo), timeout_s=30)
        assert proc.returncode == 1 and proc.stderr.splitlines() == [
            f"Error: store path {fifo} is not a regular file; give a store file"
        ]


def _corrupt_blocks(store: Path) -> None:
    """Flip bytes inside the store's blocks (past its headers): their checksums fail."""
    data = bytearray(store.read_bytes())
    for block in range(3 * 4096, len(data), 256 * 1024):
        data[block + 100 : block + 164] = bytes(b ^ 0xFF for b in data[block + 100 : block + 164])
    store.write_bytes(bytes(data))


def test_a_corrupt_store_is_reported_damaged_at_once_not_as_held(tmp_path, monkeypatch):
    """D6: DuckDB's "Corrupt database file ... in block at location" held "lock" (in "block"),
    so a damaged store was reported as held by another program after the lock timeout."""
    monkeypatch.setenv("TLXDB_LOCK_TIMEOUT_S", "5")
    store = tmp_path / "s.duckdb"
    assert tlx("import", str(run_folder(tmp_path, "r1", 2)), "--store", str(store)).exit_code == 0
    _corrupt_blocks(store)
    started = time.monotonic()
    line = one_error_line(tlx("runs", "--store", str(store)))
    assert time.monotonic() - started < 4
    assert line.startswith(f"store {store} is damaged (IO Error: Corrupt database file: ")
    assert line.endswith("rebuild it with `tlxdb import` of your runs' output folders")


def test_a_query_reads_no_file_through_duckdbs_temp_folder(tmp_path, monkeypatch):
    """D10: DuckDB's temp folder (./.tmp where tlxdb runs) stayed reachable behind the fence:
    with .tmp a symlink to /etc, read_csv('.tmp/passwd') answered without --allow-files."""
    store = tmp_path / "s.duckdb"
    assert tlx("import", str(run_folder(tmp_path, "r1", 1)), "--store", str(store)).exit_code == 0
    private = tmp_path / "private"
    private.mkdir()
    (private / "secret.csv").write_text("password\nhunter22\n")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / ".tmp").symlink_to(private)
    monkeypatch.chdir(cwd)
    r = tlx("query", f"SELECT * FROM read_csv('{cwd}/.tmp/secret.csv')", "--store", str(store))
    line = one_error_line(r)
    assert line.startswith("the query reached outside the store: Permission Error: ")
    assert "hunter22" not in r.output


@pytest.mark.parametrize("kind", ["symlink", "folder"])
def test_the_stores_generation_file_is_never_followed_nor_a_folder(tmp_path, kind):
    """A symlinked `.gen` file's target was overwritten by the counter; a `.gen` folder gave a
    traceback."""
    store = tmp_path / "s.duckdb"
    gen = tmp_path / "s.duckdb.gen"
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    if kind == "symlink":
        gen.symlink_to(target)
    else:
        gen.mkdir()
    line = one_error_line(tlx("import", str(run_folder(tmp_path, "r1", 1)), "--store", str(store)))
    what = "a symlink" if kind == "symlink" else "not a regular file"
    assert line == f"store file {gen} is {what}; remove it (tlxdb makes it anew)"
    assert target.read_text() == "keep me\n"
