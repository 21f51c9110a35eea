"""`tlxdb push | pull | runs | query` against a real team store (a PostgreSQL catalog started on
127.0.0.1 by the session's fixture, Parquet files in a folder)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cli.main import main
from tlxstore.runlog import RunLog
from tlxstore.testing import small_run

pytest.importorskip("psycopg")


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def test_push_and_pull_move_runs_between_a_local_and_the_team_store_idempotently(
    postgres, tmp_path
):
    team = postgres.store_url(tmp_path / "lake")
    local, other = str(tmp_path / "local.duckdb"), str(tmp_path / "other.duckdb")
    log = RunLog.create(tmp_path / "out", "r20261201-000000-aaaaaa")
    events = small_run(2, output_dir=str(tmp_path / "out"))
    log.append(events[:12])
    assert run("import", str(tmp_path / "out"), "--store", local).exit_code == 0

    pushed = run("push", "--to", team, "--store", local)
    assert pushed.exit_code == 0, pushed.output
    assert json.loads(pushed.stdout) | {"source": "", "target": ""} == {
        "source": "",
        "target": "",
        "runs": ["r20261201-000000-aaaaaa"],
        "events": 12,
        "added": 12,
    }
    assert json.loads(pushed.stdout)["target"].startswith("ducklake:postgres://")
    assert json.loads(run("push", "--to", team, "--store", local).stdout)["added"] == 0

    log.append(events[12:])  # the run went on locally: a push adds only what is new
    assert run("import", str(tmp_path / "out"), "--store", local).exit_code == 0
    again = json.loads(run("push", "r20261201", "--to", team, "--store", local).stdout)
    assert (again["events"], again["added"]) == (len(events), len(events) - 12)

    pulled = json.loads(run("pull", "--from", team, "--store", other).stdout)
    assert (pulled["events"], pulled["added"]) == (len(events), len(events))
    assert json.loads(run("pull", "--from", team, "--store", other).stdout)["added"] == 0
    count = "SELECT count(*) AS n, count(DISTINCT event_id) AS ids FROM events"
    for store in (team, other):
        out = run("query", count, "--store", store, "--format", "json")
        assert out.exit_code == 0, out.output
        assert json.loads(out.stdout) == [{"n": len(events), "ids": len(events)}]
    listed = run("runs", "--store", team, "--format", "json")
    assert [r["run_id"] for r in json.loads(listed.stdout)] == ["r20261201-000000-aaaaaa"]


def test_push_and_pull_refuse_bad_input_in_one_line_and_copy_nothing(postgres, tmp_path):
    team = postgres.store_url(tmp_path / "lake")
    local = str(tmp_path / "local.duckdb")
    RunLog.create(tmp_path / "out", "r1").append(small_run(1, output_dir=str(tmp_path / "out")))
    assert run("import", str(tmp_path / "out"), "--store", local).exit_code == 0
    for args, message in (
        (["push", "nope", "--to", team, "--store", local], "no run 'nope' in store"),
        (
            ["push", "--to", "ducklake:sqlite:/x", "--store", local],
            "starts with ducklake:postgres://",
        ),
        (["pull", "--from", team, "--store", local], "no store at ducklake:postgres://"),
        (["push", "--to", team, "--store", str(tmp_path / "none.duckdb")], "no store at"),
        (
            ["runs", "--store", "ducklake:postgres://127.0.0.1:1/x"],
            "cannot reach the catalog of store ducklake:postgres://127.0.0.1:1/x",
        ),
    ):
        out = run(*args)
        assert out.exit_code == 1, (args, out.output)
        assert message in out.output and len(out.output.strip().splitlines()) == 1, out.output
