"""Export and import of runs: Parquet in the record form of tlxstore.codec, plus a manifest.

An export folder holds `events.parquet` (one row per event: event_id, run_id, seq, recorded_at,
type, schema_version, payload as JSON text) and `manifest.json` (format, export version, store
schema version, event schema versions, runs, and per file its row count and sha256).

Invariants:
- Export is atomic: the folder is written under a temporary name and renamed into place; an
  existing non-empty folder is refused.
- Import checks the manifest, every file's sha256 and row count, and every record (codec.decode)
  before anything reaches the store, then ingests all of it in one transaction: an import that
  fails or is interrupted leaves nothing behind, and importing twice changes nothing.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import stat
import tempfile
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, ValidationError

from tlxstore import codec
from tlxstore.errors import (
    ImportFormatError,
    SchemaTooNewError,
    StoreError,
    UnknownRunError,
)
from tlxstore.events import EVENT_TYPES, Envelope
from tlxstore.hashing import digest_file
from tlxstore.store import Store
from tlxstore.store.schema import STORE_SCHEMA_VERSION
from tlxstore.store.sql import store_sql
from tlxstore.version import tlxdb_version

EXPORT_FORMAT = "tlxdb-export"
EXPORT_VERSION = 1
MANIFEST = "manifest.json"
EVENTS_FILE = "events.parquet"

_COLUMNS = ("event_id", "run_id", "seq", "recorded_at", "type", "schema_version", "payload")


class ExportedFile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    rows: int
    sha256: str  # tagged, "sha256:<hex>"


class Manifest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    format: str
    export_version: int
    store_schema_version: int
    event_schema_versions: dict[str, int]
    tlxdb_version: str
    created_at: datetime
    runs: list[str]
    files: dict[str, ExportedFile]


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def new_destination(dest: Path, what: str, empty_folder_ok: bool = False) -> bool:
    """Whether `dest` is free to be written as a new file or folder: False when something is
    there (an empty folder is free with `empty_folder_ok`). A symlink, or a name the file system
    cannot take (too long), raises StoreError in one line: nothing is written through a link."""
    try:
        mode = os.lstat(dest).st_mode
    except FileNotFoundError:
        return True
    except OSError as exc:
        raise StoreError(f"cannot write the {what} {dest}: {exc.strerror}") from None
    if stat.S_ISLNK(mode):
        raise StoreError(f"{what} {dest} is a symlink; tlxdb writes no new {what} through one")
    return empty_folder_ok and stat.S_ISDIR(mode) and not any(dest.iterdir())


def write_new_file(dest: Path, write: Callable[[BinaryIO], None], what: str = "file") -> None:
    """Write a new file `dest` through `write`, atomically: into a temporary file created
    exclusively beside it (a random name, O_EXCL: a planted symlink or file there is never
    followed or overwritten, and the umask gives its permissions), then renamed into place.
    A `dest` that exists is refused; nothing is left behind on failure."""
    if not new_destination(dest, what):
        raise StoreError(f"{what} {dest} exists; give a new file")
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        while True:
            tmp = dest.with_name(f".{dest.name[:200]}.{secrets.token_hex(6)}.tmp")
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
                break
            except FileExistsError:
                continue
    except OSError as exc:
        raise StoreError(f"cannot write the {what} {dest}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def export_runs(store: Store, run_refs: Sequence[str], to_dir: str | os.PathLike[str]) -> Manifest:
    """Write the runs' events to a new export folder `to_dir`; returns its manifest."""
    if not run_refs:
        raise UnknownRunError("name at least one run to export; list runs with `tlxdb runs`")
    run_ids = list(dict.fromkeys(store.resolve_run(r) for r in run_refs))
    dest = Path(to_dir).expanduser().absolute()
    if not new_destination(dest, "export folder", empty_folder_ok=True):
        raise StoreError(
            f"export folder {dest} already exists and is not empty; choose a new folder"
        )
    table = store.query_events(store_sql("export_events"), {"run_ids": run_ids})
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent))
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp's 0700: an export is made to be shared
    except OSError as exc:
        raise StoreError(f"cannot write the export folder {dest}: {exc.strerror}") from None
    try:
        pq.write_table(table, tmp / EVENTS_FILE, compression="zstd")
        _fsync(tmp / EVENTS_FILE)
        manifest = Manifest(
            format=EXPORT_FORMAT,
            export_version=EXPORT_VERSION,
            store_schema_version=STORE_SCHEMA_VERSION,
            event_schema_versions={t: cls.SCHEMA_VERSION for t, cls in sorted(EVENT_TYPES.items())},
            tlxdb_version=tlxdb_version(),
            created_at=datetime.now(UTC),
            runs=run_ids,
            files={
                EVENTS_FILE: ExportedFile(
                    rows=table.num_rows, sha256=digest_file(tmp / EVENTS_FILE)
                )
            },
        )
        (tmp / MANIFEST).write_text(manifest.model_dump_json(indent=2) + "\n")
        _fsync(tmp / MANIFEST)
        if dest.exists():
            dest.rmdir()  # empty, checked above
        os.rename(tmp, dest)
        _fsync(dest.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest


def read_manifest(folder: str | os.PathLike[str]) -> Manifest:
    path = Path(folder) / MANIFEST
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise ImportFormatError(f"{folder} has no {MANIFEST}; it is not a tlxdb export") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ImportFormatError(f"{path} is not readable JSON: {exc}") from None
    if not isinstance(raw, dict) or raw.get("format") != EXPORT_FORMAT:
        raise ImportFormatError(
            f"{path} is not a tlxdb export manifest (format is not {EXPORT_FORMAT!r})"
        )
    version = raw.get("export_version")
    if isinstance(version, int) and version > EXPORT_VERSION:
        raise SchemaTooNewError(
            f"{path} is export version {version}, this tlxdb reads up to {EXPORT_VERSION}; upgrade tlxdb"
        )
    try:
        return Manifest.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise ImportFormatError(f"{path} is a malformed manifest: {loc}: {err['msg']}") from None


def read_export(folder: str | os.PathLike[str]) -> list[Envelope]:
    """Every event of an export folder, checked against its manifest and decoded."""
    folder = Path(folder)
    manifest = read_manifest(folder)
    if set(manifest.files) != {EVENTS_FILE}:
        raise ImportFormatError(
            f"{folder}/{MANIFEST} lists {sorted(manifest.files)}, expected only {EVENTS_FILE}"
        )
    entry = manifest.files[EVENTS_FILE]
    path = folder / EVENTS_FILE
    if not path.is_file():
        raise ImportFormatError(f"{path} is missing")
    if digest_file(path) != entry.sha256:
        raise ImportFormatError(
            f"{path} does not match the sha256 in its manifest: corrupt or altered"
        )
    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as exc:
        raise ImportFormatError(
            f"{path} is not readable Parquet: {str(exc).splitlines()[0]}"
        ) from None
    if table.num_rows != entry.rows:
        raise ImportFormatError(
            f"{path} holds {table.num_rows} rows, its manifest says {entry.rows}"
        )
    missing = [c for c in _COLUMNS if c not in table.column_names]
    if missing:
        raise ImportFormatError(f"{path} lacks the columns {', '.join(missing)}")
    with codec.gc_paused():
        envs = codec.decode_located(
            table.select(list(_COLUMNS)).to_pylist(), f"{path} row", ImportFormatError
        )
    exported = {e.run_id for e in envs}
    if exported != set(manifest.runs):
        raise ImportFormatError(
            f"{path} holds runs {sorted(exported)}, its manifest lists {sorted(manifest.runs)}"
        )
    return envs
