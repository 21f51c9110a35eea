from __future__ import annotations

import json

import pytest

from tlxstore.conformance import StoreConformance

pytest.importorskip("duckdb_extension_postgres_scanner")
pytest.importorskip("psycopg")

from tlxstore.errors import StoreError  # noqa: E402
from tlxstore.fold import fold  # noqa: E402
from tlxstore.location import open_store  # noqa: E402
from tlxstore.team import TeamStore, connect_team, parse_team_url  # noqa: E402
from tlxstore.testing import envelopes, leave_behind, small_run  # noqa: E402


class TestTeamStoreConformance(StoreConformance):
    """The PostgreSQL catalog with its Parquet files in a folder (a shared file system)."""

    small_batch = 125  # each ingest is a DuckLake commit of ~20 catalog round trips

    @pytest.fixture(autouse=True)
    def _catalog(self, postgres):
        self.pg = postgres

    def make_store(self, tmp_path):
        return TeamStore(self.pg.store_url(tmp_path / "lake"))

    def rewrite_payload_key_order(self, store, event_id):
        con = connect_team(
            self.pg.store_url(store.url.data_path, schema=store.url.schema)  # the same store
        )
        (payload,) = con.execute(
            "SELECT payload FROM events WHERE event_id = ?", [event_id]
        ).fetchone()
        reordered = json.dumps(dict(reversed(list(json.loads(payload).items()))))
        assert reordered != payload
        con.execute("UPDATE events SET payload = ? WHERE event_id = ?", [reordered, event_id])
        con.close()

    def leave_behind(self, store):
        con = connect_team(self.pg.store_url(store.url.data_path, schema=store.url.schema))
        try:
            return leave_behind(con)
        finally:
            con.close()


def test_a_team_store_with_s3_data_keeps_its_parquet_in_the_bucket_and_another_host_reads_it(
    postgres, s3_server, monkeypatch
):
    import boto3

    for name, value in s3_server.environ().items():
        monkeypatch.setenv(name, value)
    url = postgres.store_url(f"s3://{s3_server.bucket}/s3-conformance/")
    run = envelopes("r1", small_run(3))
    with TeamStore(url) as writer:
        assert writer.ingest(run) == len(run)
        assert writer.ingest(run) == 0
    keys = [
        o["Key"]
        for o in boto3.client("s3", endpoint_url=s3_server.endpoint_url).list_objects_v2(
            Bucket=s3_server.bucket, Prefix="s3-conformance/"
        )["Contents"]
    ]
    assert any(k.endswith(".parquet") and "/events/" in k for k in keys), keys
    # another host: the URL without data_path (the catalog knows it)
    other = open_store(url.split("&data_path=")[0], create=False)
    assert other.run_envelopes("r1") == run
    assert fold(other.run_envelopes("r1")).finished is not None
    assert other.query("SELECT count(*) AS n FROM proj_samples").column("n")[0].as_py() > 0
    # `tlxdb query` runs fenced (files out of reach) yet reads the lake's files in the bucket
    from click.testing import CliRunner

    from cli.main import main

    out = CliRunner().invoke(
        main, ["query", "SELECT count(*) AS n FROM events", "--store", url, "--format", "csv"]
    )
    assert out.exit_code == 0 and out.stdout.split() == ["n", str(len(run))], out.output


def test_team_urls_are_checked_and_never_show_a_password():
    url = parse_team_url(
        "ducklake:postgres://me:secret@db.example:6543/lake?schema=team_a&sslmode=require&data_path=s3://b/x"
    )
    assert url.conninfo == "postgresql://me:secret@db.example:6543/lake?sslmode=require"
    assert url.schema == "team_a" and url.data_path == "s3://b/x/"
    assert "secret" not in url.shown and ":***@" in url.shown
    for bad, reason in (
        ("ducklake:postgres://db.example", "names no host or database"),
        ("ducklake:postgres://h/db?schema=Bad-Name", "must be a lower-case SQL name"),
    ):
        with pytest.raises(StoreError, match=reason):
            parse_team_url(bad)
    with pytest.raises(StoreError, match="a DuckLake store URL starts with ducklake:postgres://"):
        open_store("ducklake:sqlite:/x")
    # $TLXDB_STORE keeps a URL whole (a path would fold its `//`) and a file's path a Path
    from pathlib import Path

    from tlxstore.config import settings

    given = "ducklake:postgres://me@h:5432/db?data_path=s3://b/x"
    assert settings({"TLXDB_STORE": given}).store == given
    assert settings({"TLXDB_STORE": "/a/s.duckdb"}).store == Path("/a/s.duckdb")


def test_a_missing_team_store_is_not_created_without_create(postgres, tmp_path):
    url = postgres.store_url(tmp_path / "lake")
    with pytest.raises(StoreError, match="no store at ducklake:postgres://"):
        open_store(url, create=False)
    import psycopg

    schema = parse_team_url(url).schema
    with psycopg.connect(postgres.conninfo) as con:  # the catalog was left alone
        assert con.execute("SELECT to_regnamespace(%s)", [schema]).fetchone() == (None,)
    assert TeamStore(url).run_ids() == []
    assert open_store(url, create=False).run_ids() == []


WRITER = """
import sys
from tlxstore.team import TeamStore
from tlxstore.testing import envelopes, small_run
url, me = sys.argv[1], sys.argv[2]
store = TeamStore(url)
shared = envelopes("shared", small_run(6, tag="shared"))
own = envelopes(f"own-{me}", small_run(2, tag=me))
for i in range(0, max(len(shared), len(own)), 11):  # every writer races the others on "shared"
    store.ingest(shared[i : i + 11] + own[i : i + 11])
"""


def test_writers_on_many_hosts_racing_on_one_run_store_each_event_once(postgres, tmp_path):
    """Four processes ingest the same run's batches at the same time (as hosts that all push
    it), each with a run of its own: the advisory lock lets one check-and-append in at a time,
    so the shared run is stored once, gapless, and nothing is lost."""
    import subprocess
    import sys

    url = postgres.store_url(tmp_path / "lake")
    TeamStore(url).close()
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, url, str(i)], stderr=subprocess.PIPE)
        for i in range(4)
    ]
    for p in procs:
        assert p.wait(timeout=300) == 0, p.stderr.read().decode()[-2000:] if p.stderr else ""
    store = TeamStore(url)
    shared = envelopes("shared", small_run(6, tag="shared"))
    own = len(envelopes("own", small_run(2, tag="x")))
    row = store.query(
        "SELECT count(*) AS n, count(DISTINCT event_id) AS ids, "
        "count(DISTINCT (run_id, seq)) AS slots FROM events"
    ).to_pylist()[0]
    total = len(shared) + 4 * own
    assert row == {"n": total, "ids": total, "slots": total}
    assert store.run_envelopes("shared") == shared
    for i in range(4):
        assert [e.seq for e in store.run_envelopes(f"own-{i}")] == list(range(own))
