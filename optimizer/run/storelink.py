"""The loop's link to the shared store: ingest and prefetch off the loop's critical path.

Invariants:
- Work runs in one background thread, in submission order: every batch handed to `ingest` is
  ingested (under the store's lock) before any later batch, and `flush()` returns only when all
  submitted work is done. An error in the thread is re-raised by the next call on the link.
- `shared()` returns the store's part of the provider context as last prefetched (a refetch is
  queued after every ingest), without waiting for one in flight: what other runs learned reaches
  the provider at most one candidate late; this run's own evidence comes from its events, exact.
- A busy store never ends a run: the run log is the truth, and a batch the store cannot take
  because it stayed locked (StoreBusyError: a long query, another program) is kept and handed
  over again, ahead of the next batch, until the store takes it; a refetch the store was too
  busy for keeps what was fetched before. A full disk is kept the same way, and raised on the
  loop's next call (the run stops, resumable) but not by close(). `behind` counts the events
  the store does not hold yet; after `close()` they are left to `tlxdb import` of the output
  folder.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from tlxstore.errors import DiskFullError, StoreBusyError
from tlxstore.events import Envelope
from tlxstore.store import Store

T = TypeVar("T")
_STOP = object()


class StoreLink(Generic[T]):
    def __init__(self, store: Store, fetch: Callable[[Store], T]) -> None:
        self.store = store
        self._fetch = fetch
        self._jobs: queue.Queue[Any] = queue.Queue()
        self._error: BaseException | None = None
        self._shared: T | None = None
        self._behind: list[Envelope] = []  # handed over, not yet taken by the store (it was busy)
        self.busy: str | None = None  # why the store last turned a batch away
        self._fresh = threading.Event()
        self._thread = threading.Thread(target=self._work, name="tlxdb-store", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        while (job := self._jobs.get()) is not _STOP:
            try:
                if self._error is None:
                    job()
            except BaseException as e:  # re-raised on the loop's thread
                self._error = e
                self._fresh.set()  # wake a waiter so it sees the error
            finally:
                self._jobs.task_done()
        self._jobs.task_done()

    def _raise(self) -> None:
        if self._error is not None:
            err, self._error = self._error, None
            raise err

    def _refetch(self) -> None:
        try:
            self._shared = self._fetch(self.store)
        except StoreBusyError:
            if self._shared is None:
                raise  # nothing fetched before: nothing to go on with
        self._fresh.set()

    def _ingest(self, envelopes: list[Envelope]) -> None:
        batch = [*self._behind, *envelopes]
        try:
            self.store.ingest(batch)
        except (StoreBusyError, DiskFullError) as e:
            self._behind, self.busy = batch, e.message
            if isinstance(e, DiskFullError):
                raise  # the run stops (resumable); close() leaves it behind as well
        else:
            self._behind, self.busy = [], None

    @property
    def behind(self) -> int:
        """Events handed over that the store has not taken (it stayed busy)."""
        return len(self._behind)

    def ingest(self, envelopes: list[Envelope]) -> None:
        """Ingest a batch in the background (after any the store was too busy for), then
        refresh the prefetched context part."""
        self._raise()
        self._jobs.put(lambda: self._ingest(envelopes))
        self._jobs.put(self._refetch)

    def shared(self) -> T:
        """The store's part of the context as last prefetched (waits only for the first fetch)."""
        self._raise()
        if self._shared is None:
            if not self._fresh.is_set():
                self._jobs.put(self._refetch)
            self._fresh.wait()
            self._raise()
        assert self._shared is not None
        return self._shared

    def flush(self) -> None:
        self._jobs.join()
        self._raise()

    def close(self) -> None:
        """Finish the work submitted. Events the store could not take (busy, or its disk full)
        stay `behind`, in the run log only; any other error is raised."""
        if self._thread.is_alive():
            self._jobs.put(_STOP)
            self._thread.join()
        if isinstance(self._error, DiskFullError):
            self._error = None
        self._raise()
