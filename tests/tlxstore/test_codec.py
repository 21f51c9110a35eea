from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tlxstore import codec
from tlxstore.errors import EventValidationError, SchemaTooNewError, UnknownEventTypeError
from tlxstore.events import BenchmarkSampled, Envelope, Phase
from tlxstore.testing import small_run


def _env(event, seq=0):
    return Envelope(
        event_id=f"e{seq}",
        run_id="r1",
        seq=seq,
        recorded_at=datetime(2026, 11, 30, tzinfo=UTC),
        event=event,
    )


def test_every_event_of_a_run_round_trips_through_json():
    for i, ev in enumerate(small_run(3)):
        env = _env(ev, i)
        rec = json.loads(codec.to_json(codec.encode(env)))
        assert codec.decode(rec) == env


def test_record_has_the_documented_flat_form():
    rec = codec.encode(
        _env(BenchmarkSampled(candidate_id="c1", case_id="a", samples_us=[1.0, 2.0]))
    )
    assert list(rec) == list(codec.RECORD_KEYS)
    assert rec["type"] == "BenchmarkSampled" and rec["schema_version"] == 3
    assert "type" not in rec["payload"] and rec["payload"]["samples_us"] == [1.0, 2.0]
    assert rec["recorded_at"] == "2026-11-30T00:00:00+00:00"


def test_payload_may_be_json_text_as_parquet_keeps_it():
    rec = codec.encode(_env(BenchmarkSampled(candidate_id="c1", case_id="a", samples_us=[3.0])))
    rec["payload"] = json.dumps(rec["payload"])
    assert codec.decode(rec).event.samples_us == [3.0]


def test_newer_schema_version_is_refused_with_upgrade_advice():
    rec = codec.encode(_env(BenchmarkSampled(candidate_id="c1", case_id="a", samples_us=[1.0])))
    rec["schema_version"] = 4
    with pytest.raises(
        SchemaTooNewError, match=r"BenchmarkSampled v4, this tlxdb reads up to v3; upgrade tlxdb"
    ):
        codec.decode(rec)


def test_unknown_event_type_is_refused():
    rec = codec.encode(_env(BenchmarkSampled(candidate_id="c1", case_id="a", samples_us=[1.0])))
    rec["type"] = "KernelDreamed"
    with pytest.raises(UnknownEventTypeError, match="'KernelDreamed' is unknown"):
        codec.decode(rec)


# Each way a record can be bad: the mutation, the error decode raises, a part of its message.
_MUTATIONS = [
    (lambda r: r.pop("payload"), EventValidationError, "lacks payload"),
    (lambda r: r["payload"].update(samples_us="fast"), EventValidationError, "samples_us"),
    (lambda r: r["payload"].update(surprise=1), EventValidationError, "surprise"),
    (lambda r: r.update(seq=-1), EventValidationError, "seq"),
    (lambda r: r.update(schema_version="one"), EventValidationError, "not a version"),
    (lambda r: r.update(schema_version=99), SchemaTooNewError, "upgrade tlxdb"),
    (lambda r: r.update(type="KernelDreamed"), UnknownEventTypeError, "unknown"),
    (lambda r: r.update(recorded_at="yesterday"), EventValidationError, "recorded_at"),
    (lambda r: r.update(recorded_at="2026-11-30T00:00:00"), EventValidationError, "no time zone"),
    (lambda r: r.update(event_id=""), EventValidationError, "event_id"),
    (lambda r: r.update(payload="{not json"), EventValidationError, "payload is not JSON"),
]


@pytest.mark.parametrize(("mutate", "error", "message"), _MUTATIONS)
def test_invalid_records_are_refused_with_a_reason(mutate, error, message):
    rec = codec.encode(_env(BenchmarkSampled(candidate_id="c1", case_id="a", samples_us=[1.0])))
    mutate(rec)
    with pytest.raises(error, match=message):
        codec.decode(rec)


def _golden_records() -> list[dict]:
    path = Path(__file__).parent / "golden" / "v1" / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_decode_many_gives_what_decode_gives_record_by_record():
    records = _golden_records()  # every event type
    texts = [{**r, "payload": json.dumps(r["payload"])} for r in records]  # as Parquet keeps them
    for batch in (records, texts):
        many = codec.decode_many(batch)
        assert many == [codec.decode(r) for r in batch]
        assert [type(e.event) for e in many] == [type(codec.decode(r).event) for r in batch]


@pytest.mark.parametrize(("mutate", "error", "message"), _MUTATIONS)
def test_decode_many_raises_the_first_bad_records_own_error(mutate, error, message):
    records = _golden_records()
    first, later = records[3], records[-2]
    mutate(first)
    later["payload"] = "{not json"  # a second bad record after it: the first one is reported
    with pytest.raises(error) as batch_error:
        codec.decode_many(records)
    assert str(batch_error.value) == str(_error_of(first))
    assert message in str(batch_error.value)


def _error_of(record) -> Exception:
    try:
        codec.decode(record)
    except Exception as exc:  # noqa: BLE001 - the error itself is what is compared
        return exc
    raise AssertionError("the record decodes")


def test_decode_located_names_the_bad_record_and_keeps_the_error_class():
    records = _golden_records()
    records[4]["payload"]["surprise"] = 1
    with pytest.raises(LookupError, match=r"^f\.jsonl line 5: .*surprise"):
        codec.decode_located(records, "f.jsonl line", _Invalid)
    records = _golden_records()
    records[6]["schema_version"] = 99
    with pytest.raises(SchemaTooNewError, match=r"^f\.jsonl line 7: "):
        codec.decode_located(records, "f.jsonl line", _Invalid)


class _Invalid(EventValidationError, LookupError):
    """A record of the file is invalid."""


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
        lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
        max_leaves=20,
    )
)
def test_loads_reads_json_as_json_loads_does(value):
    text = json.dumps(value)
    assert codec.loads(text) == json.loads(text)
    assert codec.loads(text.encode()) == json.loads(text)


@pytest.mark.parametrize("text", ["{not json", '{"a": 1', "", '{"a": 1} x', b'{"a": "\xff"}'])
def test_loads_refuses_what_json_loads_refuses(text):
    with pytest.raises((json.JSONDecodeError, UnicodeDecodeError)):
        json.loads(text)
    with pytest.raises((json.JSONDecodeError, UnicodeDecodeError)):
        codec.loads(text)


def test_gc_paused_holds_the_collector_off_and_restores_it():
    import gc

    assert gc.isenabled()
    with codec.gc_paused():
        assert not gc.isenabled()
        with codec.gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # an inner pause does not end the outer one
    assert gc.isenabled()
    gc.disable()
    try:
        with codec.gc_paused():
            pass
        assert not gc.isenabled()  # a collector that was off stays off
    finally:
        gc.enable()


def test_a_non_finite_sample_never_validates_at_the_door():
    ev = BenchmarkSampled(
        candidate_id="c1", case_id="a", samples_us=[1.0, float("nan")], phase=Phase.ROUND
    )
    with pytest.raises(EventValidationError, match="non-finite"):
        codec.validate_event(ev)


def test_model_construct_bypass_is_caught_at_the_door():
    ev = BenchmarkSampled.model_construct(
        candidate_id="c1", case_id="a", samples_us="many", type="BenchmarkSampled"
    )
    with pytest.raises(EventValidationError, match="BenchmarkSampled is invalid"):
        codec.validate_event(ev)
