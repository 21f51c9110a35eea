"""Export writes Parquet plus a manifest atomically; import checks everything before storing anything."""

from __future__ import annotations

import json
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from tlxstore.errors import (
    ImportFormatError,
    SchemaTooNewError,
    StoreError,
    UnknownEventTypeError,
    UnknownRunError,
)
from tlxstore.events import RunStarted
from tlxstore.export import EVENTS_FILE, MANIFEST, export_runs, read_export
from tlxstore.hashing import digest_file
from tlxstore.store import Store
from tlxstore.store.schema import STORE_SCHEMA_VERSION
from tlxstore.testing import envelopes, small_run
from tlxstore.version import tlxdb_version


@pytest.fixture
def store(store_path):
    s = Store(store_path)
    s.ingest(envelopes("r1", small_run(2)) + envelopes("r2", small_run(1)))
    return s


def test_export_writes_parquet_and_a_manifest_with_counts_and_sha256(store, tmp_path):
    manifest = export_runs(store, ["r1"], tmp_path / "exp")
    on_disk = json.loads((tmp_path / "exp" / MANIFEST).read_text())
    assert on_disk["format"] == "tlxdb-export" and on_disk["runs"] == ["r1"]
    assert on_disk["tlxdb_version"] == tlxdb_version()  # names the code, "+src.<digest>"
    assert (
        on_disk["store_schema_version"] == STORE_SCHEMA_VERSION
        and on_disk["event_schema_versions"]["RunStarted"] == RunStarted.SCHEMA_VERSION
    )
    assert on_disk["files"][EVENTS_FILE] == {
        "rows": len(small_run(2)),
        "sha256": digest_file(tmp_path / "exp" / EVENTS_FILE),
    }
    assert (
        manifest.files[EVENTS_FILE].rows == pq.read_table(tmp_path / "exp" / EVENTS_FILE).num_rows
    )


def test_an_export_round_trips_into_a_fresh_store(store, tmp_path):
    export_runs(store, ["r1", "r2"], tmp_path / "exp")
    other = Store(tmp_path / "other.duckdb")
    assert other.ingest(read_export(tmp_path / "exp")) == len(small_run(2)) + len(small_run(1))
    assert other.run_envelopes("r1") == store.run_envelopes("r1")
    assert other.ingest(read_export(tmp_path / "exp")) == 0  # importing twice changes nothing


def test_export_refuses_a_non_empty_folder_and_unknown_runs(store, tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    with pytest.raises(StoreError, match="already exists and is not empty"):
        export_runs(store, ["r1"], tmp_path / "full")
    assert [p.name for p in (tmp_path / "full").iterdir()] == ["keep.txt"]
    with pytest.raises(UnknownRunError):
        export_runs(store, ["nope"], tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_an_interrupted_export_leaves_no_folder(store, tmp_path):
    """Killed while writing: only a hidden temporary folder can remain, never a half export."""
    code = (
        "import os, signal, pyarrow.parquet as pq\n"
        "from tlxstore.store import Store\n"
        "from tlxstore import export\n"
        "real = pq.write_table\n"
        "def die(*a, **k):\n"
        "    real(*a, **k)\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "export.pq.write_table = die\n"
        f"export.export_runs(Store({str(store.path)!r}), ['r1'], {str(tmp_path / 'exp')!r})\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True)
    assert proc.returncode == -9
    assert not (tmp_path / "exp").exists()


def _exported(store, tmp_path):
    export_runs(store, ["r1"], tmp_path / "exp")
    return tmp_path / "exp"


def test_a_tampered_parquet_file_is_refused(store, tmp_path):
    exp = _exported(store, tmp_path)
    data = bytearray((exp / EVENTS_FILE).read_bytes())
    data[len(data) // 2] ^= 0xFF
    (exp / EVENTS_FILE).write_bytes(bytes(data))
    with pytest.raises(ImportFormatError, match="does not match the sha256 in its manifest"):
        read_export(exp)


def test_a_truncated_parquet_file_with_a_matching_manifest_is_refused(store, tmp_path):
    exp = _exported(store, tmp_path)
    data = (exp / EVENTS_FILE).read_bytes()
    (exp / EVENTS_FILE).write_bytes(data[: len(data) // 2])
    manifest = json.loads((exp / MANIFEST).read_text())
    manifest["files"][EVENTS_FILE]["sha256"] = digest_file(exp / EVENTS_FILE)
    (exp / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(ImportFormatError, match="is not readable Parquet"):
        read_export(exp)


@pytest.mark.parametrize(
    ("edit", "error", "message"),
    [
        (lambda m: m.update(format="zip"), ImportFormatError, "not a tlxdb export manifest"),
        (
            lambda m: m.update(export_version=9),
            SchemaTooNewError,
            "export version 9, this tlxdb reads up to 1",
        ),
        (
            lambda m: m["files"][EVENTS_FILE].update(rows=3),
            ImportFormatError,
            "its manifest says 3",
        ),
        (lambda m: m.update(runs=["r1", "r9"]), ImportFormatError, "its manifest lists"),
        (lambda m: m.pop("files"), ImportFormatError, "malformed manifest: files"),
    ],
)
def test_a_wrong_manifest_is_refused_with_its_reason(store, tmp_path, edit, error, message):
    exp = _exported(store, tmp_path)
    manifest = json.loads((exp / MANIFEST).read_text())
    edit(manifest)
    (exp / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(error, match=message):
        read_export(exp)


def test_a_manifest_that_is_not_json_is_refused(store, tmp_path):
    exp = _exported(store, tmp_path)
    (exp / MANIFEST).write_text("{oops")
    with pytest.raises(ImportFormatError, match="not readable JSON"):
        read_export(exp)


def test_an_exported_event_of_an_unknown_type_is_refused(store, tmp_path):
    exp = _exported(store, tmp_path)
    table = pq.read_table(exp / EVENTS_FILE)
    types = table.column("type").to_pylist()
    types[3] = "KernelDreamed"
    table = table.set_column(table.column_names.index("type"), "type", [types])
    pq.write_table(table, exp / EVENTS_FILE)
    manifest = json.loads((exp / MANIFEST).read_text())
    manifest["files"][EVENTS_FILE]["sha256"] = digest_file(exp / EVENTS_FILE)
    (exp / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(UnknownEventTypeError, match="row 4: event type 'KernelDreamed' is unknown"):
        read_export(exp)
