"""The behaviour every store backend must have, as a pytest suite a backend's tests subclass:

    from tlxstore.conformance import StoreConformance

    class TestMyStore(StoreConformance):
        def make_store(self, tmp_path): return MyStore(tmp_path / "store")
        def rewrite_payload_key_order(self, store, event_id): ...  # reorder one stored payload's keys
        def leave_behind(self, store): ...  # unproject every event, as an older tlxdb left a bulk ingest

Every test of the class then runs against the backend (tests/tlxstore runs it for DuckDB and
DuckLake). Needs pytest (the `test` extra).
"""

from __future__ import annotations

import math
import random
import struct
from pathlib import Path
from typing import Any

import pytest

from tlxstore import codec
from tlxstore.errors import (
    EventConflictError,
    QueryError,
    QueryFenceError,
    ReadOnlyQueryError,
    SequenceConflictError,
    StoreError,
    UnknownRunError,
)
from tlxstore.events import (
    BenchmarkSampled,
    BuildFinished,
    CandidateProposed,
)
from tlxstore.fold import fold
from tlxstore.runlog import RunLog
from tlxstore.store import Store
from tlxstore.store.connection import Sandbox
from tlxstore.store.projection import BULK_PASS
from tlxstore.testing import cut_short, envelopes, small_run

PROJECTIONS = (
    "proj_runs",
    "proj_candidates",
    "proj_decisions",
    "proj_samples",
    "proj_sources",
    "proj_exclusions",
    "proj_failures",
    "proj_run_candidates",
    "proj_run_inputs",
)


class StoreConformance:
    """The store contract; a backend subclasses it and defines the three methods below."""

    small_batch = 11  # events per ingest where a test feeds a store loop-sized batches

    def make_store(self, tmp_path: Path) -> Store:
        """A new, empty store of the backend under tmp_path."""
        raise NotImplementedError

    def rewrite_payload_key_order(self, store: Store, event_id: str) -> None:
        """Rewrite the stored payload of one event with its JSON keys in another order."""
        raise NotImplementedError

    @pytest.fixture
    def store(self, tmp_path: Path) -> Store:
        return self.make_store(tmp_path)

    def leave_behind(self, store: Store) -> int:
        """Make the store one an older tlxdb left behind (tlxstore.testing.leave_behind); returns
        how many events are behind."""
        raise NotImplementedError

    def count(self, store: Store) -> int:
        return store.query("SELECT count(*) AS n FROM events").column("n")[0].as_py()

    def projections(self, store: Store) -> dict[str, list[dict[str, Any]]]:
        """Every projection table's rows, in one order (rows are compared, not row order)."""
        return {t: store.query(f"SELECT * FROM {t} ORDER BY ALL").to_pylist() for t in PROJECTIONS}

    def test_a_large_batch_is_projected_in_its_own_ingest_as_small_batches_are(
        self, store, tmp_path
    ):
        """The same two runs in small batches and in one batch of more than BULK_PASS events:
        each ingest leaves no projection behind, and the two stores hold the same rows."""
        r1 = small_run(60, tag="a") + cut_short("c999", "def k(): return 999")
        both = envelopes("r1", r1) + envelopes("r2", small_run(40, tag="a"))
        assert len(both) >= BULK_PASS
        (tmp_path / "small").mkdir()
        small = self.make_store(tmp_path / "small")
        for i in range(0, len(both), self.small_batch):
            small.ingest(both[i : i + self.small_batch])
            assert small.projection_lag() == 0
        assert store.ingest(both) == len(both)
        assert store.projection_lag() == 0
        rows = store.query("SELECT count(*) AS n FROM proj_decisions").column("n")[0].as_py()
        assert rows == 2 + 60 + 1 + 40
        unmeasured = store.query("SELECT candidate_id FROM proj_decisions WHERE NOT measured")
        assert unmeasured.column("candidate_id").to_pylist() == ["c999"]
        assert self.projections(store) == self.projections(small)
        assert all(self.projections(small).values())

    @pytest.mark.parametrize("size", ["small", "bulk"])
    def test_an_event_its_views_cannot_hold_is_refused_with_its_whole_batch(self, store, size):
        """Ingest and projection succeed or fail together: a proposal whose round does not fit
        the store's 32-bit column refuses its batch in one line, small or bulk, and leaves the
        store as it was (nothing stored, nothing behind)."""
        store.ingest(envelopes("good", small_run(2)))
        before = self.count(store)
        run = small_run(95 if size == "bulk" else 2)
        bad = [
            e.model_copy(update={"round": 2**31}) if isinstance(e, CandidateProposed) else e
            for e in run
        ]
        assert (len(bad) >= BULK_PASS) == (size == "bulk")
        with pytest.raises(StoreError, match=r"refused run bad: its events do not fit") as err:
            store.ingest(envelopes("bad", bad))
        assert "\n" not in str(err.value) and "nothing was written" in str(err.value)
        assert self.count(store) == before and store.projection_lag() == 0
        assert store.run_ids() == ["good"]
        assert store.query("SELECT DISTINCT run_id FROM proj_candidates").num_rows == 1

    def test_a_pass_cut_into_chunks_gives_the_same_rows(self, store, tmp_path, monkeypatch):
        both = envelopes("r1", small_run(60, tag="b")) + envelopes("r2", small_run(40, tag="b"))
        (tmp_path / "whole").mkdir()
        whole = self.make_store(tmp_path / "whole")
        whole.ingest(both)
        monkeypatch.setattr("tlxstore.store.projection.PROJECT_CHUNK", 97)
        assert store.ingest(both) == len(both)
        assert store.projection_lag() == 0 and store.project() == 0
        assert self.projections(store) == self.projections(whole)

    def test_ingested_run_reads_back_equal_in_seq_order(self, store):
        envs = envelopes("r1", small_run(3))
        assert store.ingest(envs) == len(envs)
        assert store.run_envelopes("r1") == envs
        assert fold(store.run_envelopes("r1")).finished is not None

    def test_ingesting_twice_changes_nothing(self, store):
        envs = envelopes("r1", small_run(2))
        store.ingest(envs)
        before = store.query("SELECT * FROM proj_samples ORDER BY event_seq, sample_index")
        assert store.ingest(envs) == 0
        assert store.ingest(list(reversed(envs))) == 0
        assert self.count(store) == len(envs)
        assert store.query("SELECT * FROM proj_samples ORDER BY event_seq, sample_index") == before

    def test_a_growing_log_adds_only_its_new_events(self, store, tmp_path):
        log = RunLog.create(tmp_path / "out", "r1")
        run = small_run(2)
        log.append(run[:10])
        assert store.ingest_log(tmp_path / "out") == 10
        log.append(run[10:])
        assert store.ingest_log(tmp_path / "out") == len(run) - 10
        assert [e.seq for e in store.run_envelopes("r1")] == list(range(len(run)))

    def test_same_id_with_another_body_is_a_conflict_and_changes_nothing(self, store):
        envs = envelopes("r1", small_run(1))
        store.ingest(envs)
        forged = envs[5].model_copy(
            update={"event": BuildFinished(candidate_id="x", success=False, duration_ms=1)}
        )
        with pytest.raises(EventConflictError, match=f"event {envs[5].event_id} .* different body"):
            store.ingest([forged])
        assert store.run_envelopes("r1") == envs

    def test_the_same_event_in_another_encoding_is_not_a_conflict(self, store, tmp_path):
        """An older tlxdb may have stored the same event with other bytes (key order, an old
        schema version): compared after decoding, it is the same event, and re-ingesting is a no-op."""
        envs = envelopes("r1", small_run(1))
        store.ingest(envs)
        self.rewrite_payload_key_order(store, envs[3].event_id)
        assert store.ingest(envs) == 0
        assert store.run_envelopes("r1") == envs

    def test_an_event_id_reused_in_another_run_is_a_conflict(self, store):
        store.ingest(envelopes("r1", small_run(1)))
        stolen = envelopes("r2", [BuildFinished(candidate_id="x", success=True, duration_ms=1)])[0]
        stolen = stolen.model_copy(update={"event_id": "r1-0"})
        with pytest.raises(EventConflictError, match="r1-0 is already stored as run r1 seq 0"):
            store.ingest([stolen])
        assert "r2" not in store.run_ids()

    def test_another_event_at_a_taken_seq_is_a_sequence_conflict(self, store):
        store.ingest(envelopes("r1", small_run(1)))
        other = envelopes("r1", [BuildFinished(candidate_id="x", success=True, duration_ms=1)])[0]
        other = other.model_copy(update={"event_id": "intruder"})
        with pytest.raises(SequenceConflictError, match="run r1 seq 0 is already event r1-0"):
            store.ingest([other])

    def test_a_gap_in_the_sequence_is_refused_and_the_batch_leaves_nothing(self, store):
        envs = envelopes("r1", small_run(1))
        store.ingest(envs[:3])
        with pytest.raises(
            SequenceConflictError, match="seq 5 leaves a gap; the store expects seq 3"
        ):
            store.ingest(envs[5:])
        assert self.count(store) == 3
        assert store.ingest(envs[3:]) == len(envs) - 3

    def test_a_conflict_anywhere_in_a_batch_leaves_none_of_it(self, store):
        r1 = envelopes("r1", small_run(1))
        store.ingest(r1[:2])
        forged = r1[1].model_copy(
            update={"event": BuildFinished(candidate_id="x", success=False, duration_ms=1)}
        )
        r2 = envelopes("r2", small_run(1))
        with pytest.raises(EventConflictError):
            store.ingest(r2 + [forged])
        assert store.run_ids() == ["r1"] and self.count(store) == 2
        assert store.query("SELECT count(*) AS n FROM proj_samples").column("n")[0].as_py() == 0

    def test_one_batch_may_hold_several_runs(self, store):
        both = envelopes("r1", small_run(1)) + envelopes("r2", small_run(2))
        assert store.ingest(both) == len(both)
        assert store.run_ids() == ["r1", "r2"]

    def test_every_benchmark_sample_is_one_row(self, store):
        store.ingest(
            envelopes(
                "r1", [BenchmarkSampled(candidate_id="c1", case_id="a", samples_us=[3.0, 1.0, 2.0])]
            )
        )
        rows = store.query(
            "SELECT sample_index, sample_us FROM proj_samples ORDER BY sample_index"
        ).to_pylist()
        assert rows == [
            {"sample_index": 0, "sample_us": 3.0},
            {"sample_index": 1, "sample_us": 1.0},
            {"sample_index": 2, "sample_us": 2.0},
        ]

    def test_samples_flattened_from_the_json_keep_every_bit_and_their_order(self, store):
        rng = random.Random(11)
        tricky = [0.1, 1e-7, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 1e16, 123.456]
        drawn = [
            v
            for v in (
                struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
                for _ in range(400)
            )
            if math.isfinite(v)
        ]
        values = tricky + drawn + [-v for v in tricky]
        store.ingest(
            envelopes("r1", [BenchmarkSampled(candidate_id="c1", case_id="a", samples_us=values)])
        )
        rows = store.query(
            "SELECT sample_index, sample_us FROM proj_samples ORDER BY sample_index"
        ).to_pylist()
        assert [r["sample_index"] for r in rows] == list(range(len(values)))
        assert [struct.pack("<d", r["sample_us"]) for r in rows] == [
            struct.pack("<d", v) for v in values
        ]

    def test_the_stored_payload_is_the_codecs_json_of_the_event(self, store):
        envs = envelopes("r1", small_run(2))
        store.ingest(envs)
        stored = (
            store.query("SELECT payload FROM events ORDER BY seq").column("payload").to_pylist()
        )
        assert stored == [codec.payload_json(e.event) for e in envs]

    def test_a_source_is_stored_once_across_runs(self, store):
        store.ingest(envelopes("r1", small_run(2, tag="same")))
        store.ingest(envelopes("r2", small_run(2, tag="same")))
        assert store.query("SELECT count(*) AS n FROM proj_sources").column("n")[0].as_py() == 3

    def test_queries_are_read_only(self, store):
        store.ingest(envelopes("r1", small_run(1)))
        for sql in (
            "DELETE FROM events",
            "INSERT INTO run_heads VALUES ('x', 1)",
            "DROP TABLE events",
            "COPY events TO 'x.csv'",
            "EXPLAIN ANALYZE COPY events TO 'x.csv'",
            "EXPLAIN ANALYZE DELETE FROM events",
            "EXPLAIN (ANALYZE) DELETE FROM events",
            "INSTALL httpfs",
        ):
            with pytest.raises(ReadOnlyQueryError, match="queries are read-only"):
                store.query(sql)
        with pytest.raises(QueryError, match="exactly one SQL statement"):
            store.query("SELECT 1; DELETE FROM events")
        with pytest.raises(QueryError, match="the query failed"):
            store.query("SELECT * FROM no_such_table")
        assert self.count(store) == len(small_run(1))

    def test_a_sandboxed_query_reads_the_store_and_no_file(self, store, tmp_path):
        """SQL a user typed: in the sandbox a SELECT that passes the statement check still
        reaches no file (also when its session first brings lagging views up to date), and it
        sees the views whole; allow_files lets it read files."""
        (tmp_path / "mine.csv").write_text("a\n1\n")
        reach = f"SELECT count(*) AS n FROM read_csv('{tmp_path / 'mine.csv'}')"
        assert store.query(reach).column("n")[0].as_py() == 1  # the store's own reads may
        store.ingest(envelopes("r1", small_run(95)))
        self.leave_behind(store)
        assert store.projection_lag() > 0
        n = store.query("SELECT count(*) AS n FROM proj_decisions", sandbox=Sandbox())
        assert n.column("n")[0].as_py() == 1 + 95 and store.projection_lag() == 0
        store.ingest(envelopes("r2", small_run(95)))
        self.leave_behind(store)
        assert store.projection_lag() > 0
        for _ in ("views lag", "views up to date"):
            with pytest.raises(QueryFenceError, match="file system operations are disabled"):
                store.query(reach, sandbox=Sandbox())
            assert store.projection_lag() == 0
        allowed = store.query(reach, sandbox=Sandbox(allow_files=True))
        assert allowed.column("n")[0].as_py() == 1

    def test_runs_resolve_by_id_prefix_and_output_folder(self, store, tmp_path):
        store.ingest(
            envelopes("r20261130-a", small_run(1)) + envelopes("r20261130-b", small_run(1))
        )
        assert store.resolve_run("r20261130-a") == "r20261130-a"
        assert store.resolve_run("r20261130-b"[:-1] + "b") == "r20261130-b"
        with pytest.raises(UnknownRunError, match="ambiguous"):
            store.resolve_run("r2026")
        with pytest.raises(
            UnknownRunError, match="no run 'zz' in store .*; list runs with `tlxdb runs`"
        ):
            store.resolve_run("zz")
        RunLog.create(tmp_path / "out", "r-folder").append(small_run(1))
        assert store.resolve_run(str(tmp_path / "out")) == "r-folder"
        assert len(store.run_envelopes("r-folder")) == len(small_run(1))
