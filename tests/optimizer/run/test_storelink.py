"""The store link keeps a batch a busy store turned away and hands it over again ahead of the next
one (issue 32 D1): once the store is free, it holds every event, none lost, none twice. The store
is a real DuckDB file and its lock is held by a real flock, as another tlxdb process holds it."""

from __future__ import annotations

import fcntl
import os

from optimizer.run.storelink import StoreLink
from tlxstore.locking import lock_path
from tlxstore.runlog import RunLog
from tlxstore.store import Store
from tlxstore.testing import small_run


def test_a_batch_a_busy_store_turned_away_is_taken_with_the_next_one(tmp_path):
    envelopes = RunLog.create(tmp_path / "r1", "r1").append(small_run(3))
    first, second, third = envelopes[:5], envelopes[5:12], envelopes[12:]
    path = tmp_path / "s.duckdb"
    link = StoreLink(Store(path, lock_timeout_s=0.2), lambda store: store.event_count())
    try:
        link.ingest(first)
        assert link.shared() == len(first)
        held = os.open(lock_path(path), os.O_RDWR | os.O_CREAT)
        fcntl.flock(held, fcntl.LOCK_EX)  # another process writes, for longer than the timeout
        try:
            link.ingest(second)
            link.flush()  # neither the ingest nor the refetch ends the link
            assert link.behind == len(second) and link.busy is not None
            assert link.shared() == len(first)  # the context fetched before
        finally:
            os.close(held)
        link.ingest(third)
        link.flush()
        assert link.behind == 0 and link.busy is None
        assert link.shared() == len(envelopes)
    finally:
        link.close()
    stored = Store(path).run_envelopes("r1")
    assert [e.seq for e in stored] == [e.seq for e in envelopes]
