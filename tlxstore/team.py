"""The team store: the evidence store in a DuckLake whose catalog is a PostgreSQL database and
whose data files are Parquet on a shared folder or S3-compatible object storage, for runs on
many hosts at once (docs/STORE.md, "The team store").

Named by a URL, in `--store` or `$TLXDB_STORE`:

    ducklake:postgres://USER@HOST:PORT/DATABASE?data_path=/shared/tlxdb/
    ducklake:postgres://USER@HOST/DATABASE?data_path=s3://bucket/tlxdb/&schema=team_a

`data_path` (where the Parquet files go; needed when the store is created, read from the catalog
after that) and `schema` (the PostgreSQL schema of the catalog tables, so that one database can
hold several stores; default `public`) are tlxdb's; every other query parameter is libpq's
(`sslmode`, `connect_timeout`, ...). Passwords come from libpq's own places (PGPASSWORD,
~/.pgpass), S3 keys and endpoint from the AWS_* variables (tlxstore/config.py): a URL is written
into run folders, so it carries no secret.

Invariants, on top of Store's:
- Writers are serialized across hosts by a PostgreSQL advisory lock on the catalog (exclusive to
  write, shared to read), held by a connection of this Store's own: a killed holder's connection
  closes and the server drops its lock at once, as flock does for the local store. So no two
  ingests interleave their checks and appends: no event is lost or stored twice and every run's
  seqs stay gapless, whichever host wrote them.
- The lake stays attached to this Store's DuckDB instance between calls (attaching it costs
  ~150 ms against a few ms for a file); each read call is one READ ONLY transaction, so it reads
  one snapshot and cannot write.
- The generation is the catalog's latest DuckLake snapshot id: every commit makes one, in the same
  PostgreSQL transaction as its rows.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import duckdb

from tlxstore.config import TEAM_STORE_PREFIXES, data_dir, expand_user, object_storage
from tlxstore.ducklake import extension_file
from tlxstore.errors import StoreBusyError, StoreError
from tlxstore.redaction import Redactor
from tlxstore.store import Store
from tlxstore.store.connection import drop_temporaries
from tlxstore.store.sql import ALIAS, one_line, sql_quoted, store_sql

EXTENSIONS = {
    "ducklake": "duckdb_extension_ducklake",
    "postgres_scanner": "duckdb_extension_postgres_scanner",
    "httpfs": "duckdb_extension_httpfs",
}
LOCK_CLASS = 0x746C78  # the first key of tlxdb's advisory locks ("tlx"); the second is the schema's
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]*")


@dataclass(frozen=True)
class TeamURL:
    """A team store's URL, taken apart."""

    conninfo: str  # the catalog database for libpq (a postgresql:// URI)
    data_path: str | None  # where the Parquet files go (a folder or s3://...); None: the catalog's
    schema: str  # the PostgreSQL schema of the catalog tables
    shown: str  # the URL as given, any password masked

    @property
    def lock_key(self) -> int:
        """The advisory lock's second key: this catalog schema's, so stores in one database do
        not wait for each other."""
        return int.from_bytes(hashlib.sha256(self.schema.encode()).digest()[:4], "big", signed=True)


def parse_team_url(text: str) -> TeamURL:
    """Take a `ducklake:postgres://...` URL apart; a malformed one is a StoreError."""
    if not text.startswith(TEAM_STORE_PREFIXES):
        raise StoreError(
            f"{text!r} is not a team store URL; give ducklake:postgres://HOST/DATABASE"
        )
    try:
        parts = urlsplit(text.removeprefix("ducklake:"))
        host = parts.hostname
    except ValueError as exc:  # an unclosed IPv6 bracket, a bad port
        masked = Redactor().text(text)  # its user:password@, without parsing it
        raise StoreError(f"team store URL {masked!r} is malformed: {exc}") from None
    if not host or not parts.path.strip("/"):
        raise StoreError(
            f"team store URL {_masked(parts.geturl())!r} names no host or database; "
            "give ducklake:postgres://USER@HOST:PORT/DATABASE?data_path=DIR"
        )
    libpq: list[tuple[str, str]] = []
    options: dict[str, str] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key in ("data_path", "schema"):
            options[key] = value
        else:
            libpq.append((key, value))
    schema = options.get("schema", "public")
    if not _SCHEMA_NAME.fullmatch(schema):
        raise StoreError(f"team store schema {schema!r} must be a lower-case SQL name")
    data_path = options.get("data_path") or None
    if data_path is not None and not data_path.endswith("/"):
        data_path += "/"
    if data_path is not None and "://" not in data_path:
        data_path = str(expand_user(Path(data_path)).absolute()) + "/"
    conninfo = urlunsplit(("postgresql", parts.netloc, parts.path, urlencode(libpq), ""))
    return TeamURL(conninfo, data_path, schema, "ducklake:" + _masked(parts.geturl()))


def _masked(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def load_extensions(con: duckdb.DuckDBPyConnection) -> None:
    """Load ducklake, postgres_scanner and httpfs from their PyPI packages (no network), and the
    S3 credentials of the environment as a DuckDB secret."""
    for name, package in EXTENSIONS.items():
        con.execute(f"LOAD '{sql_quoted(extension_file(name, package))}'")
    s3 = object_storage()
    if s3.key_id is None and s3.endpoint_url is None:
        return  # DuckDB's defaults (public buckets) stand
    fields = {
        "KEY_ID": s3.key_id,
        "SECRET": s3.secret,
        "SESSION_TOKEN": s3.session_token,
        "REGION": s3.region,
    }
    if s3.endpoint_url:
        endpoint = urlsplit(
            s3.endpoint_url if "://" in s3.endpoint_url else "https://" + s3.endpoint_url
        )
        fields |= {"ENDPOINT": endpoint.netloc, "URL_STYLE": "path"}
        settings = f", USE_SSL {'true' if endpoint.scheme == 'https' else 'false'}"
    else:
        settings = ""
    given = ", ".join(f"{k} '{sql_quoted(v)}'" for k, v in fields.items() if v)
    con.execute(f"CREATE OR REPLACE SECRET tlxdb_s3 (TYPE s3, {given}{settings})")


def attach_statement(url: TeamURL, alias: str, write: bool = True) -> str:
    options = [f"METADATA_SCHEMA '{url.schema}'"] + ([] if write else ["READ_ONLY"])
    if url.data_path is not None:
        options.append(f"DATA_PATH '{sql_quoted(url.data_path)}'")
    return (
        f"ATTACH 'ducklake:postgres:{sql_quoted(url.conninfo)}' AS {alias} ({', '.join(options)})"
    )


def connect_team(url: str) -> duckdb.DuckDBPyConnection:
    """A plain DuckDB connection with the team store's lake attached and in use (for a shell or
    a notebook; it takes no lock, so use it to read, and let tlxdb write)."""
    parsed = parse_team_url(url)
    con = duckdb.connect()
    load_extensions(con)
    con.execute(attach_statement(parsed, ALIAS))
    con.execute(f"USE {ALIAS}")
    return con


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise StoreError(
            "a team store needs the Python package psycopg (pip install 'tlxdb[team]')"
        ) from None
    return psycopg


class TeamStore(Store):
    """The evidence store in a DuckLake with a PostgreSQL catalog, shared by many hosts."""

    def __init__(
        self, url: str, *, create: bool = True, lock_timeout_s: float | None = None
    ) -> None:
        self.url = parse_team_url(url)
        self._pg: dict[str, Any] = {}  # "lock", "read": this Store's catalog connections
        self._pg_mutex = threading.Lock()
        self._in_read_transaction = False
        slug = re.sub(r"[^A-Za-z0-9._-]+", "_", urlsplit(self.url.conninfo).netloc.split("@")[-1])
        digest = hashlib.sha256(f"{self.url.conninfo}|{self.url.schema}".encode()).hexdigest()[:12]
        super().__init__(
            data_dir() / "team" / f"{slug}-{digest}", create=create, lock_timeout_s=lock_timeout_s
        )

    # ---- where it is --------------------------------------------------------------------
    @property
    def location(self) -> str:
        return self.url.shown

    def runs_dir(self) -> Path:
        return self.path / "runs"

    def exists(self) -> bool:
        """Whether the catalog holds a tlxdb store (its DuckLake tables and tlxdb_meta)."""
        row = self._catalog_row(
            "SELECT to_regclass(%s) IS NOT NULL", [f'"{self.url.schema}".ducklake_table']
        )
        if not row or not row[0]:
            return False
        row = self._catalog_row(
            f'SELECT count(*) FROM "{self.url.schema}".ducklake_table '
            "WHERE table_name = 'tlxdb_meta' AND end_snapshot IS NULL",
            [],
        )
        return bool(row and row[0])

    # ---- the catalog connections ---------------------------------------------------------
    def _catalog(self, role: str) -> Any:
        """This Store's connection to the catalog database for `role` ("lock" holds the advisory
        lock; "read" reads the generation without waiting behind it)."""
        with self._pg_mutex:
            con = self._pg.get(role)
            if con is None or con.closed:
                psycopg = _psycopg()
                try:
                    con = psycopg.connect(
                        self.url.conninfo,
                        autocommit=True,
                        application_name=f"tlxdb-{role}",
                        keepalives=1,
                        keepalives_idle=30,
                    )
                except psycopg.Error as exc:
                    raise StoreError(
                        f"cannot reach the catalog of store {self.location}: {one_line(exc)}"
                    ) from None
                self._pg[role] = con
            return con

    def _catalog_row(self, sql: str, params: list[Any]) -> tuple[Any, ...] | None:
        psycopg = _psycopg()
        try:
            row: tuple[Any, ...] | None = self._catalog("read").execute(sql, params).fetchone()
        except psycopg.Error as exc:
            raise StoreError(f"store {self.location}: {one_line(exc)}") from None
        return row

    def close(self) -> None:
        with self._mutex:
            super().close()
            with self._pg_mutex:
                for con in self._pg.values():
                    con.close()
                self._pg.clear()

    # ---- locking ------------------------------------------------------------------------
    @contextmanager
    def _lock(self, write: bool) -> Iterator[None]:
        """The advisory lock on the catalog, exclusive to write, shared to read. A waiter queues
        in the server (a writer is not starved by a stream of readers) for at most the lock
        timeout."""
        psycopg = _psycopg()
        con = self._catalog("lock")
        kind = "" if write else "_shared"
        try:
            con.execute(f"SET lock_timeout = '{int(self.lock_timeout_s * 1000)}ms'")
            con.execute(f"SELECT pg_advisory_lock{kind}({LOCK_CLASS}, {self.url.lock_key})")
        except psycopg.errors.LockNotAvailable:
            raise StoreBusyError(
                f"store {self.location} stayed locked by other tlxdb processes for "
                f"{self.lock_timeout_s:g} s; retry, or raise TLXDB_LOCK_TIMEOUT_S"
            ) from None
        except psycopg.Error as exc:
            con.close()
            raise StoreError(f"cannot lock the store {self.location}: {one_line(exc)}") from None
        try:
            yield
        finally:
            try:
                con.execute(f"SELECT pg_advisory_unlock{kind}({LOCK_CLASS}, {self.url.lock_key})")
            except psycopg.Error:
                con.close()  # the server drops the lock with the connection

    # ---- the generation -----------------------------------------------------------------
    def generation(self) -> int:
        """The catalog's latest DuckLake snapshot id (0 before the lake exists)."""
        row = self._catalog_row(
            f'SELECT max(snapshot_id) FROM "{self.url.schema}".ducklake_snapshot', []
        )
        return int(row[0]) if row and row[0] is not None else 0

    def _bump_generation(self) -> None:
        """Nothing to do: the COMMIT itself makes the next snapshot."""

    # ---- attaching ----------------------------------------------------------------------
    def _new_instance(self) -> duckdb.DuckDBPyConnection:
        con = super()._new_instance()
        load_extensions(con)
        return con

    def _attach_statement(self, write: bool) -> str:
        return attach_statement(self.url, ALIAS, write)

    def _schema_sql(self) -> str:
        """The store's schema without its per-column compression choices, which DuckLake does
        not take (it writes Parquet files with their own compression)."""
        return re.sub(r" USING COMPRESSION \w+", "", store_sql("schema"))

    def _open(self, con: duckdb.DuckDBPyConnection, write: bool) -> None:
        attached = con.execute(
            "SELECT count(*) FROM duckdb_databases() WHERE database_name = ?", [ALIAS]
        ).fetchone()
        if attached and attached[0]:
            con.execute(f"USE {ALIAS}")
        else:
            self._attach(con, write=True)  # kept attached; reads are READ ONLY transactions
        if not write:
            self._begin_read(con)

    def _begin_read(self, con: duckdb.DuckDBPyConnection) -> None:
        con.execute("BEGIN TRANSACTION READ ONLY")
        self._in_read_transaction = True

    def _close(self, con: duckdb.DuckDBPyConnection, write: bool) -> None:
        if self._in_read_transaction:
            self._in_read_transaction = False
            con.execute("ROLLBACK")
        drop_temporaries(con, write)

    def _done_writing(self, con: duckdb.DuckDBPyConnection) -> None:
        """Nothing to let go of: the lake stays attached, and a sandbox attaches its own."""

    def _read_only_again(self, con: duckdb.DuckDBPyConnection) -> None:
        self._begin_read(con)

    def _data_directories(self) -> list[str]:
        row = self._catalog_row(
            f'SELECT value FROM "{self.url.schema}".ducklake_metadata WHERE key = %s',
            ["data_path"],
        )
        return [str(row[0])] if row and row[0] else []

    def _check_intact(self, con: duckdb.DuckDBPyConnection) -> None:
        """Nothing to check at open: a DuckLake checks its files as it reads them."""
