"""`tlxdb export --view` writes a typed Parquet file (JSON columns as structs); `query --format
csv` keeps every double exact and `--format json` nests JSON columns. On the history store."""

from __future__ import annotations

import csv
import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from support import history_store as h

import queries
from cli.main import main
from tlxstore.store import Store


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return h.build(tmp_path_factory.mktemp("history") / "store.duckdb")


def cli(*args: str):
    return CliRunner().invoke(main, list(args))


def test_a_view_exports_as_typed_parquet_with_json_as_structs(store, tmp_path):
    out = cli(
        "export", "--view", "candidates", "--to", str(tmp_path / "c.parquet"), "--store", str(store)
    )
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout) == {
        "to": str(tmp_path / "c.parquet"),
        "view": "candidates",
        "rows": 107,
    }
    t = pq.read_table(tmp_path / "c.parquet")
    schema = t.schema
    assert pa.types.is_struct(schema.field("knobs").type)
    assert schema.field("knobs").type.field("BLOCK").type == pa.int64()
    assert schema.field("decided_speedup").type == pa.float64()
    assert pa.types.is_timestamp(schema.field("proposed_at").type)
    assert schema.field("round").type == pa.int32()
    rows = {(r["run_id"], r["candidate_id"]): r for r in t.to_pylist()}
    c003 = rows[(h.H200_SOFTMAX, "c003")]
    assert c003["knobs"]["num_warps"] == 16 and c003["knobs"]["BLOCK"] == 8192
    expected = queries.query(
        Store(store),
        f"SELECT decided_speedup FROM candidates WHERE run_id = '{h.H200_SOFTMAX}' AND candidate_id = 'c003'",
    ).to_pylist()[0]["decided_speedup"]
    assert c003["decided_speedup"] == expected


def test_a_nested_list_view_exports_too(store, tmp_path):
    out = cli(
        "export",
        "--view",
        "run_settings",
        "--to",
        str(tmp_path / "s.parquet"),
        "--store",
        str(store),
    )
    assert out.exit_code == 0, out.output
    t = pq.read_table(tmp_path / "s.parquet")
    assert pa.types.is_list(t.schema.field("argv").type) and pa.types.is_struct(
        t.schema.field("case_weights").type
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--view", "nope"], "no view 'nope'"),
        (["--view", "runs", "r1"], "give runs or --view, not both"),
        ([], "give the runs to export, or --view NAME"),
    ],
)
def test_bad_exports_are_one_line_errors_that_write_nothing(store, tmp_path, args, message):
    out = cli("export", *args, "--to", str(tmp_path / "x.parquet"), "--store", str(store))
    assert out.exit_code != 0 and message in out.output and not (tmp_path / "x.parquet").exists()


def test_an_existing_file_is_never_overwritten(store, tmp_path):
    (tmp_path / "x.parquet").write_text("mine")
    out = cli(
        "export", "--view", "runs", "--to", str(tmp_path / "x.parquet"), "--store", str(store)
    )
    assert out.exit_code == 1 and "exists; give a new file" in out.stderr
    assert (tmp_path / "x.parquet").read_text() == "mine"


def test_csv_keeps_every_double_exact(store):
    sql = "SELECT run_id, revalidated_speedup FROM runs WHERE revalidated_speedup IS NOT NULL ORDER BY run_id"
    out = cli("query", sql, "--store", str(store), "--format", "csv")
    assert out.exit_code == 0, out.output
    got = [float(r["revalidated_speedup"]) for r in csv.DictReader(io.StringIO(out.stdout))]
    exact = queries.query(Store(store), sql).column("revalidated_speedup").to_pylist()
    assert got == exact and len(got) == 6
    assert any(len(r.split(",")[1]) > 8 for r in out.stdout.splitlines()[1:])  # not 6 digits


def test_json_nests_json_columns(store):
    sql = f"SELECT candidate_id, knobs FROM candidates WHERE run_id = '{h.H200_SOFTMAX}' ORDER BY candidate_id"
    out = cli("query", sql, "--store", str(store), "--format", "json")
    assert out.exit_code == 0, out.output
    rows = json.loads(out.stdout)
    assert rows[0] == {"candidate_id": "baseline", "knobs": {}}
    assert rows[3]["knobs"] == {"BLOCK": 8192, "num_stages": 3, "num_warps": 16}
