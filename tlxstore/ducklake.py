"""The store on DuckLake: the same tables in a DuckLake (a catalog database plus Parquet data
files), reached through DuckDB's ducklake extension. Here the catalog is a SQLite file, for one
host or a shared file system; a team's store has its catalog in PostgreSQL (tlxstore/team.py).

`DuckLakeStore(path)` takes the catalog file; the data files go to `<path>.files/`. Everything
else (ingest, queries, lock, version check) is Store's. The extensions load from the PyPI
packages duckdb-extension-ducklake and duckdb-extension-sqlite-scanner (same version as duckdb);
without them the store refuses with a message naming them.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import duckdb

from tlxstore.errors import StoreError
from tlxstore.store import Store
from tlxstore.store.sql import ALIAS, sql_quoted, store_sql

EXTENSIONS = {
    "sqlite_scanner": "duckdb_extension_sqlite_scanner",
    "ducklake": "duckdb_extension_ducklake",
}


def extension_file(name: str, package: str) -> Path:
    """The file of DuckDB extension `name` in the installed PyPI package `package`."""
    try:
        module = importlib.import_module(package)
    except ImportError:
        raise StoreError(
            f"a DuckLake store needs the Python package {package.replace('_', '-')}=={duckdb.__version__}"
        ) from None
    folder = Path(module.__file__ or "").parent / "extensions" / f"v{duckdb.__version__}"
    path = folder / f"{name}.duckdb_extension"
    if not path.is_file():
        raise StoreError(
            f"{package} has no {name} extension for DuckDB {duckdb.__version__} (looked in {folder})"
        )
    return path


def load_extensions(con: duckdb.DuckDBPyConnection) -> None:
    """Load the ducklake and sqlite extensions from their installed packages (no network)."""
    for name, package in EXTENSIONS.items():
        con.execute(f"LOAD '{sql_quoted(extension_file(name, package))}'")


def attach_statement(catalog: Path, alias: str, write: bool) -> str:
    """The ATTACH of a DuckLake whose catalog is the SQLite file `catalog`."""
    data = catalog.with_name(catalog.name + ".files")
    mode = "" if write else ", READ_ONLY"
    return f"ATTACH 'ducklake:sqlite:{sql_quoted(catalog)}' AS {alias} (DATA_PATH '{sql_quoted(data)}/'{mode})"


def connect_lake(catalog: str | Path, write: bool = False) -> duckdb.DuckDBPyConnection:
    """A plain DuckDB connection with the lake attached and in use (for a shell or a notebook;
    tlxdb itself goes through DuckLakeStore and its lock)."""
    con = duckdb.connect()
    load_extensions(con)
    con.execute(attach_statement(Path(catalog).absolute(), ALIAS, write))
    con.execute(f"USE {ALIAS}")
    return con


class DuckLakeStore(Store):
    """The evidence store in a DuckLake with a SQLite catalog at `path`."""

    def _new_instance(self) -> duckdb.DuckDBPyConnection:
        con = super()._new_instance()
        load_extensions(con)
        return con

    def _attach_statement(self, write: bool) -> str:
        return attach_statement(self.path, ALIAS, write)

    def _schema_sql(self) -> str:
        """The store's schema without its per-column compression choices, which DuckLake does
        not take (it writes Parquet files with their own compression)."""
        return re.sub(r" USING COMPRESSION \w+", "", store_sql("schema"))
