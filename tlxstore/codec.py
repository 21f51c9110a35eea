"""The only (de)serializer of events: an Envelope <-> one flat record.

Record form (a run log line, a Parquet row, an export row):
    {"event_id", "run_id", "seq", "recorded_at", "type", "schema_version", "payload"}
`payload` is the event's fields without `type`; `recorded_at` is ISO 8601 with a time zone.

`decode` refuses an unknown event type (UnknownEventTypeError) and a schema version newer than this
tlxdb's (SchemaTooNewError), upcasts older versions (upcasting.py), and validates the result
(EventValidationError). `encode` produces only what `decode` accepts.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pydantic_core
from pydantic import TypeAdapter, ValidationError

from tlxstore.errors import (
    EventValidationError,
    SchemaTooNewError,
    TlxdbError,
    UnknownEventTypeError,
)
from tlxstore.events import EVENT_TYPES, AnyEvent, Envelope, Event
from tlxstore.upcasting import RELEASED, Upcasters

RECORD_KEYS = ("event_id", "run_id", "seq", "recorded_at", "type", "schema_version", "payload")


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"]) or "(event)"
    return f"{loc}: {err['msg']}"


@dataclass(frozen=True)
class Codec:
    """Encodes and decodes records against a set of event types and upcasters."""

    event_types: Mapping[str, type[Event]] = field(default_factory=lambda: dict(EVENT_TYPES))
    upcasters: Upcasters = RELEASED

    def encode(self, env: Envelope) -> dict[str, Any]:
        return record(env, env.event.model_dump(mode="json", exclude={"type"}))

    def decode(self, record: Mapping[str, Any]) -> Envelope:
        event_type, data = self._event_data(record)
        try:
            event = self.event_types[event_type].model_validate(data)
        except ValidationError as exc:
            raise EventValidationError(
                f"event {record['event_id']} ({event_type}) is invalid: {_first_error(exc)}"
            ) from None
        return Envelope.model_construct(
            event_id=_text(record, "event_id"),
            run_id=_text(record, "run_id"),
            seq=_seq(record),
            recorded_at=_timestamp(record),
            event=event,
        )

    def decode_many(self, records: Sequence[Mapping[str, Any]]) -> list[Envelope]:
        """decode for a batch: the same envelopes, or the error decode gives for the first bad
        record. Every record is checked and upcast in Python, then the whole batch is validated
        in one pydantic call (a third of the time of one call per record); on any failure the
        records are decoded one by one, so the error and its order are decode's own."""
        if self.event_types != EVENT_TYPES:  # the batch validator knows the released types only
            return [self.decode(r) for r in records]
        try:
            rows = [
                {
                    "event": self._event_data(r)[1],
                    "event_id": _text(r, "event_id"),
                    "run_id": _text(r, "run_id"),
                    "seq": _seq(r),
                    "recorded_at": _timestamp(r),
                }
                for r in records
            ]
            return _ENVELOPES.validate_python(rows)
        except (TlxdbError, ValidationError):
            return [self.decode(r) for r in records]  # raises the first bad record's error

    def _event_data(self, record: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        """The record's event type and its fields at the current schema version (upcast), as
        the event's model validates them; refuses what is not an event record."""
        if not isinstance(record, Mapping):
            raise EventValidationError(
                f"an event record must be a JSON object, not {type(record).__name__}"
            )
        missing = [k for k in RECORD_KEYS if k not in record]
        if missing:
            raise EventValidationError(f"event record lacks {', '.join(missing)}")
        event_type = record["type"]
        cls = self.event_types.get(event_type) if isinstance(event_type, str) else None
        if cls is None:
            raise UnknownEventTypeError(
                f"event type {event_type!r} is unknown to this tlxdb (event {record['event_id']}); upgrade tlxdb to read it"
            )
        version = record["schema_version"]
        if not isinstance(version, int) or isinstance(version, bool) or version < 0:
            raise EventValidationError(
                f"event {record['event_id']}: schema_version {version!r} is not a version"
            )
        if version > cls.SCHEMA_VERSION:
            raise SchemaTooNewError(
                f"event {record['event_id']} is {event_type} v{version}, this tlxdb reads up to "
                f"v{cls.SCHEMA_VERSION}; upgrade tlxdb to read it"
            )
        payload = record["payload"]
        if isinstance(payload, str):  # Parquet and DuckDB rows keep the payload as JSON text
            try:
                payload = loads(payload)
            except json.JSONDecodeError as exc:
                raise EventValidationError(
                    f"event {record['event_id']}: payload is not JSON ({exc.msg})"
                ) from None
        if not isinstance(payload, dict):
            raise EventValidationError(f"event {record['event_id']}: payload must be a JSON object")
        try:
            payload = self.upcasters.upcast(event_type, version, cls.SCHEMA_VERSION, payload)
        except KeyError as exc:
            raise EventValidationError(f"event {record['event_id']}: {exc.args[0]}") from None
        return event_type, {**payload, "type": event_type}


def _text(record: Mapping[str, Any], key: str) -> str:
    value = record[key]
    if not isinstance(value, str) or not value:
        raise EventValidationError(f"event record: {key} must be a non-empty string, not {value!r}")
    return value


def _seq(record: Mapping[str, Any]) -> int:
    seq = record["seq"]
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
        raise EventValidationError(
            f"event {record['event_id']}: seq {seq!r} is not a sequence number"
        )
    return seq


def _timestamp(record: Mapping[str, Any]) -> datetime:
    value = record["recorded_at"]
    try:
        ts = value if isinstance(value, datetime) else datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise EventValidationError(
            f"event {record['event_id']}: recorded_at {value!r} is not an ISO 8601 time"
        ) from None
    if ts.tzinfo is None:
        raise EventValidationError(
            f"event {record['event_id']}: recorded_at {value!r} has no time zone"
        )
    return ts


DEFAULT = Codec()


def record(env: Envelope, payload: dict[str, Any]) -> dict[str, Any]:
    """The record of an envelope whose payload (JSON-able, without `type`) is already at hand."""
    return {
        "event_id": env.event_id,
        "run_id": env.run_id,
        "seq": env.seq,
        "recorded_at": env.recorded_at.isoformat(),
        "type": env.event.type,
        "schema_version": type(env.event).SCHEMA_VERSION,
        "payload": payload,
    }


def encode(env: Envelope) -> dict[str, Any]:
    """The record form of an envelope (payload as a JSON-able dict)."""
    return DEFAULT.encode(env)


def decode(record: Mapping[str, Any]) -> Envelope:
    """An envelope from a record of any released schema version, upcast and validated."""
    return DEFAULT.decode(record)


def loads(text: str | bytes) -> Any:
    """One JSON value, parsed by pydantic-core (jiter: half the time of json.loads for a record,
    a third for a payload). What it refuses goes to json.loads, which either reads it as before
    (NaN, a lone surrogate, ...) or raises json.JSONDecodeError / UnicodeDecodeError."""
    try:
        return pydantic_core.from_json(text)
    except ValueError:
        return json.loads(text)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector held off while a batch of events is built or read.
    Such a batch allocates a few objects per field and no reference cycles, yet its allocations
    set off collections that walk every live object, the batch's own included: reading a
    30,000-event log took 34 us an event with the collector on, 18 with it held off. It runs
    again (if it was on) when the block ends."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def decode_many(records: Sequence[Mapping[str, Any]]) -> list[Envelope]:
    """decode for a batch of records (faster; the same result and the same first error)."""
    return DEFAULT.decode_many(records)


def decode_located(
    records: Sequence[Mapping[str, Any]], where: str, invalid: type[TlxdbError]
) -> list[Envelope]:
    """decode_many for the records of one file, a bad one named `{where} {n}` (n from 1; e.g.
    where="events.jsonl line"): an invalid record raises `invalid`, an unknown type or a newer
    schema keeps its own error class."""
    try:
        return decode_many(records)
    except TlxdbError:
        pass  # decoded again one by one below, to name the record
    out = []
    for n, rec in enumerate(records, start=1):
        try:
            out.append(decode(rec))
        except (UnknownEventTypeError, SchemaTooNewError) as exc:
            raise type(exc)(f"{where} {n}: {exc.message}") from None
        except EventValidationError as exc:
            raise invalid(f"{where} {n}: {exc.message}") from None
    return out


def to_json(record: Mapping[str, Any]) -> str:
    """One record as strict JSON (no NaN/Infinity); ValueError on a non-finite number."""
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def to_json_bytes(record: Mapping[str, Any]) -> bytes:
    """to_json as UTF-8 bytes, written by pydantic-core (one Rust call, not Python's encoder).
    Non-finite numbers come out as bare NaN/Infinity tokens; only when those letters appear at
    all (in a string they are harmless) is the record re-encoded by to_json, which refuses a real
    NaN or infinity with ValueError."""
    raw = pydantic_core.to_json(record, inf_nan_mode="constants")
    if b"NaN" in raw or b"Infinity" in raw:
        return to_json(record).encode()
    return raw


def payload_json(event: Event) -> str:
    """The payload as the store and Parquet keep it: JSON text, fields in declaration order."""
    return payload_bytes(event).decode()


def payload_bytes(event: Event) -> bytes:
    """payload_json as UTF-8 bytes. The full JSON starts with the `type` key (the first field of
    every event); cutting it off is the same text as dumping with `type` excluded, and faster."""
    raw = event.__pydantic_serializer__.to_json(event)
    prefix = b'{"type":"' + event.type.encode() + b'"'
    if raw.startswith(prefix + b","):
        return b"{" + raw[len(prefix) + 1 :]
    if raw == prefix + b"}":
        return b"{}"
    return event.model_dump_json(exclude={"type"}).encode()


def validate_event(event: Event) -> Event:
    """The event re-validated from its own fields (guards against model_construct and NaN)."""
    return checked_payload(event)[0]


def checked_payload(event: Event) -> tuple[Event, dict[str, Any]]:
    """The event re-validated from its own fields, and its payload (JSON-able, without `type`).
    Refuses what model_construct let through and non-finite numbers (EventValidationError)."""
    try:
        data = event.model_dump(mode="json", warnings=False)
        checked = type(event).model_validate(data)
        to_json(data)
    except ValidationError as exc:
        raise EventValidationError(f"{event.type} is invalid: {_first_error(exc)}") from None
    except ValueError:
        raise EventValidationError(
            f"{event.type} holds a non-finite number (NaN or infinity)"
        ) from None
    del data["type"]
    return checked, data


_BATCH: TypeAdapter[list[AnyEvent]] = TypeAdapter(list[AnyEvent])
_ENVELOPES: TypeAdapter[list[Envelope]] = TypeAdapter(list[Envelope])


def checked_payloads(events: Sequence[Event]) -> list[tuple[Event, dict[str, Any]]]:
    """checked_payload for a batch: the events re-validated in one call, with their payloads
    (JSON-able, without `type`). Non-finite numbers are NOT checked here: to_json refuses them
    (ValueError), and a caller that writes the payloads must turn that into EventValidationError
    before writing anything (as RunLog.append does). A batch that does not validate raises the
    message checked_payload gives for its first invalid event."""
    data = [e.model_dump(mode="json", warnings=False) for e in events]
    try:
        checked: list[Event] = list(_BATCH.validate_python(data))
    except ValidationError:
        for event in events:
            checked_payload(event)  # raises with the event's own message
        raise  # pragma: no cover - the batch and the events validate alike
    for d in data:
        del d["type"]
    return list(zip(checked, data, strict=True))
