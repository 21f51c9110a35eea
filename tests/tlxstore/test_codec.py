from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

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
    assert rec["type"] == "BenchmarkSampled" and rec["schema_version"] == 1
    assert "type" not in rec["payload"] and rec["payload"]["samples_us"] == [1.0, 2.0]
    assert rec["recorded_at"] == "2026-11-30T00:00:00+00:00"


def test_payload_may_be_json_text_as_parquet_keeps_it():
    rec = codec.encode(_env(BenchmarkSampled(candidate_id="c1", case_id="a", samples_us=[3.0])))
    rec["payload"] = json.dumps(rec["payload"])
    assert codec.decode(rec).event.samples_us == [3.0]


def test_newer_schema_version_is_refused_with_upgrade_advice():
    rec = codec.encode(_env(BenchmarkSampled(candidate_id="c1", case_id="a", samples_us=[1.0])))
    rec["schema_version"] = 2
    with pytest.raises(
        SchemaTooNewError, match=r"BenchmarkSampled v2, this tlxdb reads up to v1; upgrade tlxdb"
    ):
        codec.decode(rec)


def test_unknown_event_type_is_refused():
    rec = codec.encode(_env(BenchmarkSampled(candidate_id="c1", case_id="a", samples_us=[1.0])))
    rec["type"] = "KernelDreamed"
    with pytest.raises(UnknownEventTypeError, match="'KernelDreamed' is unknown"):
        codec.decode(rec)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda r: r.pop("payload"), "lacks payload"),
        (lambda r: r["payload"].update(samples_us="fast"), "samples_us"),
        (lambda r: r["payload"].update(surprise=1), "surprise"),
        (lambda r: r.update(seq=-1), "seq"),
        (lambda r: r.update(schema_version="one"), "not a version"),
        (lambda r: r.update(recorded_at="yesterday"), "e0"),
        (lambda r: r.update(payload="{not json"), "payload is not JSON"),
    ],
)
def test_invalid_records_are_refused_with_a_reason(mutate, message):
    rec = codec.encode(_env(BenchmarkSampled(candidate_id="c1", case_id="a", samples_us=[1.0])))
    mutate(rec)
    with pytest.raises(EventValidationError, match=message):
        codec.decode(rec)


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
