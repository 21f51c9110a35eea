"""Every error tlxdb raises derives from TlxdbError.

A subclass's docstring is its default message; pass a more specific one-line message when
there is one. All errors are picklable (they carry only their message), so they can cross the
harness process boundary.
"""

from __future__ import annotations


class TlxdbError(Exception):
    """tlxdb failed."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (type(self).__doc__ or "").strip().splitlines()[0])

    @property
    def message(self) -> str:
        return str(self.args[0])

    def __reduce__(self):  # keep subclasses picklable with their message
        return (type(self), (self.message,))


class ConfigError(TlxdbError):
    """The configuration is invalid."""


class EventValidationError(TlxdbError):
    """An event failed validation and was not written."""


class SchemaTooNewError(TlxdbError):
    """The data was written by a newer tlxdb; upgrade tlxdb to read it."""


class UnknownEventTypeError(TlxdbError):
    """The data holds an event type this tlxdb does not know."""


class LogCorruptError(TlxdbError):
    """A run log is corrupt."""


class RunLogExistsError(TlxdbError):
    """A run log already exists there; open it instead of creating it."""


class SequenceConflictError(TlxdbError):
    """An append used a stale expected sequence number."""


class EventConflictError(TlxdbError):
    """An event id already exists in the store with a different body."""


class StoreError(TlxdbError):
    """The evidence store cannot be used."""


class StoreDamagedError(StoreError):
    """The evidence store file is damaged; restore it from a backup or rebuild it with tlxdb import."""


class StoreBusyError(StoreError):
    """The evidence store stayed locked by other tlxdb processes for too long."""


class ReadOnlyQueryError(StoreError):
    """Queries are read-only; statements that write are refused."""


class QueryError(StoreError):
    """The query failed."""


class QueryTimeoutError(QueryError):
    """The query ran past its time limit and was stopped."""


class QueryFenceError(QueryError):
    """The query reached for something outside its sandbox (a file, an extension)."""


class RunBusyError(TlxdbError):
    """Another process is writing this run."""


class UnknownRunError(TlxdbError):
    """No such run in the store."""


class ImportFormatError(TlxdbError):
    """The data to import is not in a format tlxdb understands."""


class StoreTooNewError(StoreError):
    """The store was written by a newer tlxdb; upgrade tlxdb to open it."""


class OutsideFolderError(ImportFormatError):
    """A file of an imported folder is a symlink, or not a regular file; it is not read."""


class TooDeepError(TlxdbError):
    """A JSON document nests deeper than tlxdb reads."""


class DiskFullError(TlxdbError):
    """The disk is full (or a file-size limit was reached); free space and retry."""


class RunInterruptedError(TlxdbError):
    """The run stopped as interrupted (a full disk); `tlxdb optimize --resume` continues it."""
