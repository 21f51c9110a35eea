"""The loop's link to the shared store: ingest and prefetch off the loop's critical path.

Invariants:
- Work runs in one background thread, in submission order: every batch handed to `ingest` is
  ingested (under the store's lock) before any later batch, and `flush()` returns only when all
  submitted work is done. An error in the thread is re-raised by the next call on the link.
- `shared()` returns the store's part of the provider context as last prefetched (a refetch is
  queued after every ingest), without waiting for one in flight: what other runs learned reaches
  the provider at most one candidate late; this run's own evidence comes from its events, exact.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

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
        self._shared = self._fetch(self.store)
        self._fresh.set()

    def ingest(self, envelopes: list[Envelope]) -> None:
        """Ingest a batch in the background, then refresh the prefetched context part."""
        self._raise()
        self._jobs.put(lambda: self.store.ingest(envelopes))
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
        if self._thread.is_alive():
            self._jobs.put(_STOP)
            self._thread.join()
        self._raise()
