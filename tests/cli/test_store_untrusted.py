"""The store under untrusted input and hostile surroundings, through the real CLI: events its
views cannot hold are refused with their batch (never committed unprojected), a store left
behind is caught up or reported in one line, and the store's own files are never followed
anywhere or mistaken for something else."""

from __future__ import annotations

import json
import os
import stat
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


def _store_with_run(tmp: Path) -> Path:
    store = tmp / "s.duckdb"
    assert tlx("import", str(run_folder(tmp, "r1", 1)), "--store", str(store)).exit_code == 0
    return store


def test_export_view_never_writes_through_a_planted_temporary_file(tmp_path):
    """D4: `export --view` wrote its Parquet bytes through a symlink planted at its predictable
    temporary name (.NAME.tmp)."""
    store = _store_with_run(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    (tmp_path / ".runs.parquet.tmp").symlink_to(victim)
    r = tlx(
        "export", "--view", "runs", "--to", str(tmp_path / "runs.parquet"), "--store", str(store)
    )
    assert r.exit_code == 0, r.output
    assert victim.read_text() == "keep me\n"
    assert not (tmp_path / "runs.parquet").is_symlink()
    assert [p.name for p in tmp_path.glob(".runs.parquet*")] == [".runs.parquet.tmp"]


def test_export_to_a_symlink_or_an_overlong_name_is_one_line(tmp_path):
    store = _store_with_run(tmp_path)
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    long = tmp_path / ("x" * 300)
    cases = [
        (["r1", "--to", str(tmp_path / "link")],
         f"export folder {tmp_path / 'link'} is a symlink; tlxdb writes no new export folder through one"),
        (["r1", "--to", str(long)], f"cannot write the export folder {long}: File name too long"),
        (["--view", "runs", "--to", f"{long}.parquet"],
         f"cannot write the Parquet file {long}.parquet: File name too long"),
    ]  # fmt: skip
    for args, message in cases:
        assert one_error_line(tlx("export", *args, "--store", str(store))) == message
    assert list((tmp_path / "real").iterdir()) == []


def test_an_export_folder_gets_the_permissions_the_umask_gives(tmp_path):
    """Export folders were made 0700 (mkdtemp's)."""
    store = _store_with_run(tmp_path)
    old = os.umask(0o022)
    try:
        r = tlx("export", "r1", "--to", str(tmp_path / "e"), "--store", str(store))
    finally:
        os.umask(old)
    assert r.exit_code == 0, r.output
    assert stat.S_IMODE((tmp_path / "e").stat().st_mode) == 0o755


def test_a_query_result_of_more_rows_than_it_prints_is_refused_in_one_line(tmp_path):
    """A 30M-row result took 3.5 minutes and 12 GB before it printed; now a result stops at the
    cap (one row over it here, so the test stays small)."""
    store = _store_with_run(tmp_path)
    started = time.monotonic()
    r = tlx("query", "SELECT * FROM range(1000001)", "--store", str(store), "--format", "csv")
    assert one_error_line(r) == (
        "the query returns more than 1,000,000 rows; add a LIMIT, or write them to a file with "
        "`tlxdb export --view` or your own DuckDB client"
    )
    assert r.stdout == "" and time.monotonic() - started < 60


def test_a_store_path_of_an_unknown_users_home_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("TLXDB_STORE", "~nouser-tlxdb/x.duckdb")
    expected = (
        "~nouser-tlxdb/x.duckdb: ~nouser-tlxdb has no home folder here; give the path in full"
    )
    assert one_error_line(tlx("runs")) == expected
    assert one_error_line(tlx("runs", "--store", "~nouser-tlxdb/x.duckdb")) == expected


def test_a_malformed_team_url_is_one_line_with_its_password_masked(tmp_path):
    store = _store_with_run(tmp_path)
    r = tlx("push", "--store", str(store), "--to", "ducklake:postgres://u:pw@[::1/db")
    assert one_error_line(r) == (
        "team store URL 'ducklake:postgres://[redacted]@[::1/db' is malformed: Invalid IPv6 URL"
    )


def test_the_default_store_folder_is_made_on_a_fresh_machine_and_a_named_one_is_not(
    tmp_path, monkeypatch
):
    """README's first command on a fresh machine: no --store, no $TLXDB_STORE, no
    ~/.local/share/tlxdb yet. The per-user folder is made (owner only); a --store whose folder is
    missing stays an error (a typo is not a new folder)."""
    monkeypatch.delenv("TLXDB_STORE", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "fresh" / "share"))
    export = Path(__file__).resolve().parents[2] / "benchmarks/results/aa_cpu_2026-12-04/export"
    r = tlx("import", str(export))
    assert r.exit_code == 0, r.output
    folder = tmp_path / "fresh" / "share" / "tlxdb"
    assert (folder / "store.duckdb").is_file() and stat.S_IMODE(folder.stat().st_mode) == 0o700
    line = one_error_line(
        tlx("import", str(export), "--store", str(tmp_path / "typo" / "s.duckdb"))
    )
    assert line == f"store folder {tmp_path / 'typo'} does not exist"
