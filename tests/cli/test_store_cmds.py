"""`tlxdb runs | query | export | import` driven through the real CLI against real store files."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import main
from tlxstore.runlog import RunLog
from tlxstore.store import Store
from tlxstore.testing import small_run

TLX_RUN = Path(__file__).parent.parent / "importers" / "fixtures" / "tlx_run"


@pytest.fixture
def filled(tmp_path):
    RunLog.create(tmp_path / "out", "r20261130-120000-aaaaaa").append(
        small_run(2, output_dir=str(tmp_path / "out"))
    )
    store = tmp_path / "s.duckdb"
    result = CliRunner().invoke(main, ["import", str(tmp_path / "out"), "--store", str(store)])
    assert result.exit_code == 0, result.output
    return store


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def test_import_reports_what_it_added_and_twice_adds_nothing(filled, tmp_path):
    again = run("import", str(tmp_path / "out"), "--store", str(filled))
    assert again.exit_code == 0 and json.loads(again.stdout)["added"] == 0


def test_runs_lists_the_runs_newest_first(filled, tmp_path):
    run("import", str(TLX_RUN), "--store", str(filled))
    out = run("runs", "--store", str(filled), "--format", "json")
    assert out.exit_code == 0
    rows = json.loads(out.stdout)
    assert [r["run_id"] for r in rows][
        0
    ] == "r20261130-120000-aaaaaa"  # the TLX import is dated 1970
    assert rows[0]["winner_id"] == "c002" and rows[0]["candidates"] == 2


def test_runs_uses_tlxdb_store_by_default(filled, monkeypatch):
    monkeypatch.setenv("TLXDB_STORE", str(filled))
    out = run("runs")
    assert (
        out.exit_code == 0 and "r20261130-120000-aaaaaa" in out.stdout and "(1 row)" in out.stdout
    )


@pytest.mark.parametrize("fmt", ["table", "csv", "json"])
def test_query_prints_in_each_format(filled, fmt):
    out = run(
        "query",
        "SELECT candidate_id, count(*) AS n FROM samples GROUP BY 1 ORDER BY 1",
        "--store",
        str(filled),
        "--format",
        fmt,
    )
    assert out.exit_code == 0, out.output
    if fmt == "json":
        assert json.loads(out.stdout) == [
            {"candidate_id": c, "n": 10} for c in ("baseline", "c001", "c002")
        ]
    elif fmt == "csv":
        assert out.stdout.splitlines() == ["candidate_id,n", "baseline,10", "c001,10", "c002,10"]
    else:
        lines = out.stdout.splitlines()
        assert (
            lines[0].split() == ["candidate_id", "n"]
            and lines[2].split() == ["baseline", "10"]
            and lines[-1] == "(3 rows)"
        )


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("DELETE FROM events", "Error: queries are read-only; a DELETE statement is refused"),
        (
            "CREATE TABLE x AS SELECT 1",
            "Error: queries are read-only; a CREATE statement is refused",
        ),
        ("SELEKT 1", "Error: the query does not parse"),
        ("SELECT * FROM nope", "Error: the query failed: Catalog Error"),
    ],
)
def test_bad_queries_fail_with_one_line_and_change_nothing(filled, sql, message):
    before = Store(filled).event_count()
    out = run("query", sql, "--store", str(filled))
    assert out.exit_code == 1
    assert out.stderr.startswith(message) and out.stderr.count("\n") == 1
    assert Store(filled).event_count() == before


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            "EXPLAIN ANALYZE COPY (SELECT 1) TO '{store}' (FORMAT csv)",
            "Error: queries are read-only; EXPLAIN is allowed of one SELECT only, not of a COPY",
        ),
        (
            "EXPLAIN ANALYZE COPY (SELECT 1) TO '{other}' (FORMAT csv)",
            "Error: queries are read-only; EXPLAIN is allowed of one SELECT only, not of a COPY",
        ),
        (
            "EXPLAIN (ANALYZE) COPY (SELECT 1) TO '{store}' (FORMAT csv)",
            "Error: queries are read-only; EXPLAIN is allowed of one SELECT only",
        ),
        (
            "EXPLAIN ANALYZE INSTALL httpfs",
            "Error: queries are read-only; EXPLAIN is allowed of one SELECT only, not of an INSTALL",
        ),
        ("INSTALL httpfs", "Error: queries are read-only; an INSTALL statement is refused"),
        ("LOAD httpfs", "Error: queries are read-only; a LOAD statement is refused"),
        ("ATTACH '{other}' AS o", "Error: queries are read-only; an ATTACH statement is refused"),
        ("SET enable_external_access = true", "Error: queries are read-only; a SET statement"),
    ],
)
def test_query_writes_no_file_and_installs_nothing(filled, tmp_path, sql, message):
    other = tmp_path / "other.csv"
    before = _digest(filled)
    sql = sql.format(store=filled, other=other)
    for files in ([], ["--allow-files"]):
        out = run("query", sql, "--store", str(filled), *files)
        assert out.exit_code == 1, out.output
        assert out.stderr.startswith(message) and out.stderr.count("\n") == 1
        assert _digest(filled) == before and not other.exists()


def test_query_reads_no_file_but_the_store(filled, tmp_path):
    for sql in (
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT * FROM read_text('/etc/passwd')",
        "SELECT * FROM glob('/root/*')",
        f"SELECT * FROM read_parquet('{_own_parquet(tmp_path)}')",
    ):
        out = run("query", sql, "--store", str(filled))
        assert out.exit_code == 1, out.output
        assert out.stderr.startswith("Error: the query reached outside the store: Permission")
        assert out.stderr.rstrip().endswith("--allow-files lets it read your files)")
        assert out.stderr.count("\n") == 1


def _own_parquet(tmp_path: Path) -> Path:
    import duckdb

    path = tmp_path / "mine.parquet"
    if not path.exists():
        duckdb.execute(f"COPY (SELECT 7 AS x) TO '{path}' (FORMAT parquet)")
    return path


def test_query_with_allow_files_reads_your_own_files(filled, tmp_path):
    mine = _own_parquet(tmp_path)
    sql = f"SELECT x, (SELECT count(*) FROM candidates) AS c FROM read_parquet('{mine}')"
    out = run("query", sql, "--store", str(filled), "--allow-files", "--format", "json")
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout) == [{"x": 7, "c": 3}]


def test_query_explains_a_select(filled):
    for sql in ("EXPLAIN SELECT count(*) FROM candidates", "EXPLAIN ANALYZE SELECT 1"):
        out = run("query", sql, "--store", str(filled))
        assert out.exit_code == 0 and "_plan " in out.stdout, out.output


def test_commands_on_a_missing_store_say_how_to_fill_one(tmp_path):
    out = run("runs", "--store", str(tmp_path / "none.duckdb"))
    assert out.exit_code == 1 and "no store at" in out.stderr and "tlxdb import" in out.stderr
    assert not (tmp_path / "none.duckdb").exists()


def test_a_store_from_a_newer_tlxdb_is_refused_by_every_command(filled):
    import duckdb

    from tlxstore.store.schema import STORE_SCHEMA_VERSION

    con = duckdb.connect(str(filled))
    con.execute(
        "UPDATE tlxdb_meta SET value = ? WHERE key = 'store_schema_version'",
        [str(STORE_SCHEMA_VERSION + 1)],
    )
    con.close()
    for args in (
        ["runs"],
        ["query", "SELECT 1"],
        ["import", str(TLX_RUN)],
        ["export", "r2026", "--to", "/tmp/never"],
    ):
        out = run(*args, "--store", str(filled))
        assert out.exit_code == 1 and "written by a newer tlxdb" in out.stderr, args


def test_an_unwritable_store_location_is_a_one_line_error(tmp_path):
    out = run("import", str(TLX_RUN), "--store", "/sys/tlxdb-store.duckdb")
    assert out.exit_code == 1 and out.stderr.strip().endswith(
        "is not writable (cannot create tlxdb-store.duckdb.lock)"
    )


def test_export_then_import_into_another_store(filled, tmp_path):
    out = run("export", "r2026", "--to", str(tmp_path / "exp"), "--store", str(filled))
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout) == {
        "to": str(tmp_path / "exp"),
        "runs": ["r20261130-120000-aaaaaa"],
        "events": len(small_run(2)),
    }
    other = tmp_path / "other.duckdb"
    first = run("import", str(tmp_path / "exp"), "--store", str(other))
    second = run("import", str(tmp_path / "exp"), "--store", str(other))
    assert (
        json.loads(first.stdout)["added"] == len(small_run(2))
        and json.loads(second.stdout)["added"] == 0
    )


def test_export_of_an_unknown_run_names_the_next_step(filled, tmp_path):
    out = run("export", "zzz", "--to", str(tmp_path / "exp"), "--store", str(filled))
    assert out.exit_code == 1 and "no run 'zzz'" in out.stderr and "tlxdb runs" in out.stderr
    assert not (tmp_path / "exp").exists()


def test_import_of_a_corrupt_log_names_the_line_and_stores_nothing(tmp_path):
    RunLog.create(tmp_path / "out", "r1").append(small_run(1))
    log = tmp_path / "out" / "events.jsonl"
    lines = log.read_text().splitlines(keepends=True)
    lines[1] = "{broken\n"
    log.write_text("".join(lines))
    out = run("import", str(tmp_path / "out"), "--store", str(tmp_path / "s.duckdb"))
    assert out.exit_code == 1 and "events.jsonl line 2: not a JSON record" in out.stderr
    assert Store(tmp_path / "s.duckdb").run_ids() == []


def test_the_console_script_runs_a_query(filled):
    proc = subprocess.run(
        [
            str(Path(sys.executable).parent / "tlxdb"),
            "query",
            "SELECT count(*) AS n FROM runs",
            "--store",
            str(filled),
            "--format",
            "csv",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0 and proc.stdout.splitlines() == ["n", "1"]
