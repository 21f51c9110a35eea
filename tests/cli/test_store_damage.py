"""A damaged store file, and one this process cannot write, through the real CLI: one line naming
the file and what to do, exit 1, found before any work (no output folder, no validation)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.bundles import kernel_copy, vecadd_bundle
from support.files import unwritable

from cli.main import main
from tlxstore.runlog import RunLog
from tlxstore.store import Store
from tlxstore.testing import small_run

RUN = "r20261130-120000-aaaaaa"


@pytest.fixture(scope="module")
def good_store(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("good")
    RunLog.create(tmp / "out", RUN).append(small_run(2, output_dir=str(tmp / "out")))
    store = tmp / "s.duckdb"
    Store(store).ingest_log(tmp / "out")
    return store


def _commands(tmp: Path) -> dict[str, list[str]]:
    optimize = ["optimize", "--kernel", str(kernel_copy(tmp / "src"))]
    optimize += ["--bundle", str(vecadd_bundle(tmp / "bundle")), "--no-commit-winner"]
    return {
        "runs": ["runs"],
        "show": ["show", RUN],
        "query": ["query", "SELECT count(*) FROM candidates"],
        "export": ["export", RUN, "--to", str(tmp / "export")],
        "report": ["report", RUN, "--to", str(tmp / "report")],
        "replay": ["replay", RUN],
        "import": ["import", str(tmp / "none")],
        "optimize": [*optimize, "--output-dir", str(tmp / "run")],
        "resume": ["optimize", "--resume", RUN],
    }


def _one_line_error(args: list[str], store: Path) -> str:
    out = CliRunner().invoke(main, [*args, "--store", str(store)])
    assert out.exit_code == 1, (args, out.output)
    assert out.stderr.startswith("Error: ") and out.stderr.count("\n") == 1, out.stderr
    return out.stderr.strip()


@pytest.mark.parametrize("cut_to", [12288, 300_000, 2_000_000])
def test_a_damaged_store_is_one_line_naming_the_file_and_what_to_do(good_store, tmp_path, cut_to):
    """A store file cut short (here, or in the middle of its blocks): every command refuses it
    at open, so optimize neither validates the bundle nor leaves an output folder."""
    store = tmp_path / "s.duckdb"
    shutil.copy(good_store, store)
    assert store.stat().st_size > cut_to
    with store.open("r+b") as f:
        f.truncate(cut_to)
    (tmp_path / "none").mkdir()
    for name, args in _commands(tmp_path).items():
        line = _one_line_error(args, store)
        assert f"store {store} is damaged" in line, (name, line)
        assert line.endswith("rebuild it with `tlxdb import` of your runs' output folders"), name
    assert not any((tmp_path / d).exists() for d in ("export", "report", "run"))


def test_a_file_that_is_not_duckdb_says_what_to_do(tmp_path):
    store = tmp_path / "s.duckdb"
    store.write_bytes(b"")
    line = _one_line_error(["runs"], store)
    assert line.endswith(
        "is not a DuckDB file (damaged, or another program's); move it aside or choose another store"
    )


def test_a_store_that_cannot_be_written_is_refused_before_any_work(good_store, tmp_path):
    store = tmp_path / "s.duckdb"
    shutil.copy(good_store, store)
    Store(store).close()  # its lock file exists; only the store file is held unwritable
    commands = _commands(tmp_path)
    with unwritable(store):
        for name in ("optimize", "resume"):
            line = _one_line_error(commands[name], store)
            assert (
                line
                == f"Error: store {store} is not writable; make it writable or choose another store"
            ), name
        assert not (tmp_path / "run").exists()
        assert "c001" in CliRunner().invoke(main, ["show", RUN, "--store", str(store)]).stdout
