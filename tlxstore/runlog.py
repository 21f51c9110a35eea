"""A run's own event log: `<output_dir>/events.jsonl`, the source of truth and the acknowledgment point.

Invariants:
- One JSON object per line, in the record form of tlxstore.codec, plus `"batch_last"`: the seq of
  the last event of the batch the line was written in.
- `append` is atomic per batch and durable on return: the batch is validated first (bad input never
  enters: pydantic re-validates the whole batch in one call, and a non-finite number refuses the
  batch while its lines are built, before anything is written), written with one write, flushed
  and fsynced. Sequence numbers are dense per run,
  starting at 0; `expected_seq` that is not the log's next seq raises SequenceConflictError.
- Reading ignores a torn tail (a batch whose last line never made it, including a line without its
  newline): that batch was never acknowledged. Anything wrong before the tail raises
  LogCorruptError naming the line.
- Appends from several RunLog objects (or processes) on one file are serialized by an exclusive
  fcntl lock on the file; a torn tail is cut off before the next batch is written.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from tlxstore import codec
from tlxstore.disk import disk_full
from tlxstore.errors import (
    EventValidationError,
    LogCorruptError,
    RunLogExistsError,
    SequenceConflictError,
    StoreError,
)
from tlxstore.events import Envelope, Event, new_event_id
from tlxstore.redaction import Redactor

LOG_NAME = "events.jsonl"


@dataclass(frozen=True)
class _Scan:
    records: list[dict]  # complete batches, in order
    good_bytes: int  # length of the file prefix holding them
    run_id: str | None
    next_seq: int


def log_path(path: str | os.PathLike[str]) -> Path:
    """The log file for `path`: a file or a `*.jsonl` path itself, else `<path>/events.jsonl` (an output folder)."""
    p = Path(path)
    return p if p.is_file() or p.suffix == ".jsonl" else p / LOG_NAME


def _scan(data: bytes, name: str) -> _Scan:
    records: list[dict] = []
    pending: list[dict] = []
    good = 0
    pos = 0
    run_id: str | None = None
    next_seq = 0
    # what follows the last newline is a write cut short
    for lineno, raw in enumerate(data.split(b"\n")[:-1], start=1):
        pos += len(raw) + 1
        try:
            rec = codec.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            if pos >= len(data):  # the last line: a torn write (e.g. padded with NULs)
                break
            raise LogCorruptError(f"{name} line {lineno}: not a JSON record") from None
        if (
            not isinstance(rec, dict)
            or not isinstance(rec.get("seq"), int)
            or not isinstance(rec.get("batch_last"), int)
        ):
            raise LogCorruptError(
                f"{name} line {lineno}: not an event record (seq/batch_last missing)"
            )
        rid = rec.get("run_id")
        if run_id is None:
            run_id = rid
        elif rid != run_id:
            raise LogCorruptError(
                f"{name} line {lineno}: run_id {rid!r} differs from the log's {run_id!r}"
            )
        if rec["seq"] != next_seq + len(pending):
            raise LogCorruptError(
                f"{name} line {lineno}: seq {rec['seq']} where {next_seq + len(pending)} was expected"
            )
        if pending and rec["batch_last"] != pending[0]["batch_last"]:
            raise LogCorruptError(
                f"{name} line {lineno}: batch ending at seq {pending[0]['batch_last']} is incomplete"
            )
        pending.append(rec)
        if rec["seq"] == rec["batch_last"]:
            records.extend(pending)
            next_seq += len(pending)
            pending = []
            good = pos
        elif rec["batch_last"] < rec["seq"]:
            raise LogCorruptError(
                f"{name} line {lineno}: batch_last {rec['batch_last']} precedes seq {rec['seq']}"
            )
    # whatever is pending now is the torn tail: a batch that was never acknowledged
    return _Scan(records, good, run_id if records else None, next_seq)


def read_envelopes(path: str | os.PathLike[str]) -> list[Envelope]:
    """Every acknowledged event of a log (a file or an output folder), in seq order."""
    p = log_path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise LogCorruptError(f"no run log at {p}") from None
    except OSError as exc:
        raise LogCorruptError(f"cannot read run log {p}: {exc.strerror}") from None
    with codec.gc_paused():
        return codec.decode_located(_scan(data, str(p)).records, f"{p} line", LogCorruptError)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class RunLog:
    """The append-only event log of one run."""

    def __init__(
        self, path: Path, run_id: str, next_seq: int, size: int, redactor: Redactor | None = None
    ) -> None:
        self.path = path
        self.run_id = run_id
        self.next_seq = next_seq
        self._size = size  # file size after our last read or write
        # what no event may hold (tlxstore/redaction.py): by default this process's secrets
        self.redactor = redactor or Redactor.from_environment()

    @classmethod
    def create(
        cls, path: str | os.PathLike[str], run_id: str, redactor: Redactor | None = None
    ) -> RunLog:
        """A new, empty log at `path` (a folder means `<folder>/events.jsonl`); refuses an existing file."""
        p = log_path(path)
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            raise RunLogExistsError(f"a run log already exists at {p}") from None
        except OSError as exc:
            raise StoreError(f"cannot create run log {p}: {exc.strerror}") from None
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        _fsync_dir(p.parent)
        return cls(p, run_id, 0, 0, redactor)

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        run_id: str | None = None,
        redactor: Redactor | None = None,
    ) -> RunLog:
        """An existing log; run_id and next_seq come from its records (`run_id` is needed only
        when the log holds none yet)."""
        p = log_path(path)
        try:
            data = p.read_bytes()
        except OSError as exc:
            raise LogCorruptError(f"cannot read run log {p}: {exc.strerror}") from None
        scan = _scan(data, str(p))
        rid = scan.run_id or run_id
        if rid is None:
            raise LogCorruptError(f"{p}: the log holds no events, so its run id is unknown")
        if run_id is not None and scan.run_id is not None and run_id != scan.run_id:
            raise LogCorruptError(f"{p}: holds run {scan.run_id}, not {run_id}")
        return cls(p, rid, scan.next_seq, scan.good_bytes, redactor)

    def append(
        self, events: Sequence[Event] | Iterable[Event], expected_seq: int | None = None
    ) -> list[Envelope]:
        """Validate, write, flush and fsync one batch; durable on return. Returns its envelopes."""
        with codec.gc_paused():
            return self._append(list(events), expected_seq)

    def _write(self, fd: int, size: int, blob: bytes) -> None:
        """Write and fsync `blob` at `size`. On a full disk nothing of it stays (the file is cut
        back to `size`) and DiskFullError says so in one line."""
        view = memoryview(blob)
        try:
            os.lseek(fd, size, os.SEEK_SET)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        except OSError as exc:
            full = disk_full(exc, str(self.path))
            if full is None:
                raise
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)
            raise full from None

    def _append(self, events: list[Event], expected_seq: int | None) -> list[Envelope]:
        checked = codec.checked_payloads(events)
        if not checked:
            return []
        fd = os.open(self.path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            if size != self._size:  # someone else appended (or a torn tail is there): re-read
                data = os.pread(fd, size, 0)
                scan = _scan(data, str(self.path))
                self.next_seq = scan.next_seq
                if scan.good_bytes != size:
                    os.ftruncate(fd, scan.good_bytes)
                    size = scan.good_bytes
                self._size = size
            if expected_seq is not None and expected_seq != self.next_seq:
                raise SequenceConflictError(
                    f"run {self.run_id}: append expected seq {expected_seq}, the log is at {self.next_seq}"
                )
            now = datetime.now(UTC)
            first = self.next_seq
            last = first + len(checked) - 1
            envs, lines = [], []
            for i, (event, payload) in enumerate(checked):
                env = Envelope.model_construct(  # every field is ours or validated above
                    event_id=new_event_id(),
                    run_id=self.run_id,
                    seq=first + i,
                    recorded_at=now,
                    event=event,
                )
                try:
                    line = codec.to_json_bytes({**codec.record(env, payload), "batch_last": last})
                except ValueError:  # NaN or infinity: nothing of the batch is written
                    raise EventValidationError(
                        f"{event.type} holds a non-finite number (NaN or infinity)"
                    ) from None
                redacted = self.redactor.data(line)
                if redacted is not line and redacted != line:  # the event as written, masked
                    line = redacted
                    env = codec.decode({**codec.loads(line), "recorded_at": now})
                envs.append(env)
                lines.append(line)
            blob = b"\n".join(lines) + b"\n"
            self._write(fd, size, blob)
            self._size = size + len(blob)
            self.next_seq = last + 1
            return envs
        finally:
            os.close(fd)  # closing releases the lock

    def envelopes(self) -> list[Envelope]:
        """Every acknowledged event, in seq order (a torn last batch is ignored)."""
        return read_envelopes(self.path)

    def __iter__(self) -> Iterator[Envelope]:
        return iter(self.envelopes())
