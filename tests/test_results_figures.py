"""benchmarks/results/ stays small, keeps its runs as tlxdb exports, and every figure that
benchmarks/README.md ("The figures the docs quote") gives a query for is that query's answer, run
as written there through `tlxdb query` over a store made by importing every export."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import main

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results"
README = (REPO / "benchmarks" / "README.md").read_text()
FIGURES = re.findall(
    r"<!-- figure: (\w+) -->\n[^`]*```sql\n(.*?)```\n```csv\n(.*?)```", README, re.S
)
MAX_FILES = 165
MAX_BYTES = 2_600_000


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("results") / "results.duckdb"
    exports = sorted(str(m.parent) for m in RESULTS.rglob("manifest.json"))
    done = CliRunner().invoke(main, ["import", "--store", str(path), *exports])
    assert done.exit_code == 0, done.output
    return path


def test_results_hold_at_most_165_files_and_2_6_mb():
    files = [p for p in RESULTS.rglob("*") if p.is_file()]
    assert len(files) <= MAX_FILES
    assert sum(p.stat().st_size for p in files) <= MAX_BYTES


def test_every_kept_run_is_a_tlxdb_export_and_every_folder_is_described():
    assert not list(RESULTS.rglob("events.jsonl"))
    parquets = list(RESULTS.rglob("events.parquet"))
    assert parquets and all((p.parent / "manifest.json").is_file() for p in parquets)
    for folder in (p for p in RESULTS.iterdir() if p.is_dir()):
        assert f"| `{folder.name}/` |" in README, f"{folder.name}/ is not in benchmarks/README.md"


def test_the_figures_have_unique_names():
    names = [name for name, _, _ in FIGURES]
    assert len(names) >= 25 and len(set(names)) == len(names)


@pytest.mark.parametrize(("sql", "answer"), [f[1:] for f in FIGURES], ids=[f[0] for f in FIGURES])
def test_each_documented_figure_is_its_query_answer(store, monkeypatch, sql, answer):
    monkeypatch.chdir(REPO)  # the queries read the summaries by paths from the repository root
    done = CliRunner().invoke(
        main, ["query", sql, "--store", str(store), "--allow-files", "--format", "csv"]
    )
    assert done.exit_code == 0, done.output
    assert done.output.strip() == answer.strip()
