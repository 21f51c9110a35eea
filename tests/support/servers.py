"""Real servers on 127.0.0.1 for the team store's tests, each started once per test session:
PostgreSQL from Debian's `postgresql` package (initdb + pg_ctl; as the `postgres` user when the
tests run as root, since PostgreSQL refuses to run as root) and moto's S3 server in its own
process. Every store a test makes gets a fresh catalog schema in the one database."""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

DATABASE = "tlxdb"
USER = "tlxdb"
BUCKET = "tlxdb-team"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pg_bindir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    if initdb:
        return Path(initdb).resolve().parent
    raise RuntimeError(
        "the team store's tests need PostgreSQL's server: apt-get install -y postgresql "
        "(.ci/run installs it)"
    )


@dataclass
class Postgres:
    port: int
    _schemas: Iterator[int] = field(default_factory=itertools.count)

    @property
    def conninfo(self) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{DATABASE}"

    def store_url(self, data_path: str | Path, schema: str | None = None) -> str:
        """A team store URL with a catalog schema of its own (a fresh one unless named)."""
        schema = schema or f"s{os.getpid()}_{next(self._schemas)}"
        return (
            f"ducklake:postgres://{USER}@127.0.0.1:{self.port}/{DATABASE}"
            f"?schema={schema}&data_path={data_path}"
        )


@contextmanager
def running_postgres() -> Iterator[Postgres]:
    """A PostgreSQL server on 127.0.0.1 for the block, with one database (also used by
    benchmarks/store_team_bench.py)."""
    bindir = _pg_bindir()
    root = Path(tempfile.mkdtemp(prefix="tlxdb-pg-"))
    root.chmod(0o755)
    as_user: list[str] = []
    if os.geteuid() == 0:
        as_user = ["runuser", "-u", "postgres", "--"]
        shutil.chown(root, "postgres")
    data, port = root / "data", free_port()

    def run(*cmd: str) -> None:
        subprocess.run([*as_user, *cmd], check=True, capture_output=True, timeout=120)

    run(
        str(bindir / "initdb"),
        "-D",
        str(data),
        "-U",
        USER,
        "--auth=trust",
        "-E",
        "UTF8",
        "--no-sync",
    )
    options = (
        f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c max_connections=300 "
        "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    )
    try:
        run(
            str(bindir / "pg_ctl"),
            "-D",
            str(data),
            "-o",
            options,
            "-l",
            str(root / "log"),
            "-w",
            "start",
        )
        run(str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", USER, DATABASE)
        yield Postgres(port)
    finally:
        subprocess.run(
            [*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    """One PostgreSQL server for the test session (about 2 s to start on two cores)."""
    with running_postgres() as server:
        yield server


@dataclass(frozen=True)
class S3:
    endpoint_url: str
    bucket: str = BUCKET

    def environ(self) -> dict[str, str]:
        """The AWS_* variables a team store with s3:// data reads (tlxstore/config.py)."""
        return {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": self.endpoint_url,
        }


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3]:
    """moto's S3 server in its own process, with one bucket."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"moto's S3 server did not start (exit {proc.poll()})")
                time.sleep(0.1)
        s3 = S3(f"http://127.0.0.1:{port}")
        import boto3

        boto3.client(
            "s3",
            endpoint_url=s3.endpoint_url,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name="us-east-1",
        ).create_bucket(Bucket=s3.bucket)
        yield s3
    finally:
        proc.terminate()
        proc.wait(timeout=30)
