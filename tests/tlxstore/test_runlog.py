from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tlxstore.errors import (
    EventValidationError,
    LogCorruptError,
    RunLogExistsError,
    SchemaTooNewError,
    SequenceConflictError,
)
from tlxstore.events import BenchmarkSampled, BuildFinished
from tlxstore.fold import fold
from tlxstore.runlog import RunLog, read_envelopes
from tlxstore.testing import small_run


def _sample(i: int) -> BenchmarkSampled:
    return BenchmarkSampled(candidate_id="c1", case_id="a", samples_us=[float(i + 1)])


def test_appended_events_read_back_in_dense_seq_order(tmp_path):
    log = RunLog.create(tmp_path, "r1")
    log.append(small_run(2)[:4])
    log.append(small_run(2)[4:])
    envs = log.envelopes()
    assert [e.seq for e in envs] == list(range(len(small_run(2))))
    assert {e.run_id for e in envs} == {"r1"}
    assert fold(envs).finished is not None


def test_create_refuses_an_existing_log(tmp_path):
    RunLog.create(tmp_path, "r1")
    with pytest.raises(RunLogExistsError):
        RunLog.create(tmp_path / "events.jsonl", "r1")


def test_open_recovers_run_id_and_next_seq(tmp_path):
    RunLog.create(tmp_path, "r1").append([_sample(i) for i in range(3)])
    log = RunLog.open(tmp_path)
    assert (log.run_id, log.next_seq) == ("r1", 3)
    assert [e.seq for e in log.append([_sample(9)], expected_seq=3)] == [3]


def test_open_of_an_empty_log_needs_the_run_id(tmp_path):
    RunLog.create(tmp_path, "r1")
    with pytest.raises(LogCorruptError, match="run id is unknown"):
        RunLog.open(tmp_path)
    assert RunLog.open(tmp_path, run_id="r1").next_seq == 0


def test_stale_expected_seq_fails_and_writes_nothing(tmp_path):
    log = RunLog.create(tmp_path, "r1")
    log.append([_sample(0)], expected_seq=0)
    with pytest.raises(SequenceConflictError, match="expected seq 0, the log is at 1"):
        log.append([_sample(1)], expected_seq=0)
    assert len(log.envelopes()) == 1


def test_two_writers_on_one_log_keep_seq_dense(tmp_path):
    a = RunLog.create(tmp_path, "r1")
    b = RunLog.open(tmp_path, run_id="r1")
    a.append([_sample(0)])
    b.append([_sample(1), _sample(2)])  # b learns a's append under the file lock
    with pytest.raises(SequenceConflictError):
        a.append([_sample(3)], expected_seq=1)
    a.append([_sample(3)])
    assert [e.seq for e in a.envelopes()] == [0, 1, 2, 3]


def test_invalid_event_never_enters_the_log(tmp_path):
    log = RunLog.create(tmp_path, "r1")
    bad = BenchmarkSampled(candidate_id="c1", case_id="a", samples_us=[float("inf")])
    with pytest.raises(EventValidationError):
        log.append([_sample(0), bad])
    assert log.envelopes() == [] and (tmp_path / "events.jsonl").read_bytes() == b""


def test_torn_last_batch_is_ignored_and_overwritten_by_the_next_append(tmp_path):
    log = RunLog.create(tmp_path, "r1")
    log.append([_sample(0)])
    log.append([_sample(1), _sample(2), _sample(3)])
    data = (tmp_path / "events.jsonl").read_bytes()
    lines = data.splitlines(keepends=True)
    # cut inside the second batch, after two complete lines of it and half of the third
    torn = b"".join(lines[:3]) + lines[3][: len(lines[3]) // 2]
    (tmp_path / "events.jsonl").write_bytes(torn)
    assert [e.seq for e in read_envelopes(tmp_path)] == [0]  # no partial batch visible
    log2 = RunLog.open(tmp_path)
    assert log2.next_seq == 1
    log2.append([_sample(7)])
    assert [(e.seq, e.event.samples_us) for e in read_envelopes(tmp_path)] == [
        (0, [1.0]),
        (1, [8.0]),
    ]


def test_torn_last_line_padded_with_nuls_is_ignored(tmp_path):
    log = RunLog.create(tmp_path, "r1")
    log.append([_sample(0)])
    with open(tmp_path / "events.jsonl", "ab") as f:
        f.write(b"\0" * 40 + b"\n")
    assert len(read_envelopes(tmp_path)) == 1


def test_corruption_in_the_middle_names_the_line(tmp_path):
    log = RunLog.create(tmp_path, "r1")
    for i in range(4):
        log.append([_sample(i)])
    p = tmp_path / "events.jsonl"
    lines = p.read_bytes().splitlines(keepends=True)
    lines[1] = b'{"garbage": \n'
    p.write_bytes(b"".join(lines))
    with pytest.raises(LogCorruptError, match=r"events.jsonl line 2: not a JSON record"):
        read_envelopes(p)


def test_a_missing_line_in_the_middle_is_corruption(tmp_path):
    log = RunLog.create(tmp_path, "r1")
    for i in range(3):
        log.append([_sample(i)])
    p = tmp_path / "events.jsonl"
    lines = p.read_bytes().splitlines(keepends=True)
    p.write_bytes(lines[0] + lines[2])
    with pytest.raises(LogCorruptError, match="line 2: seq 2 where 1 was expected"):
        read_envelopes(p)


def test_an_invalid_payload_in_the_middle_names_the_line(tmp_path):
    log = RunLog.create(tmp_path, "r1")
    log.append([_sample(0), _sample(1)])
    log.append([_sample(2)])
    p = tmp_path / "events.jsonl"
    lines = p.read_text().splitlines()
    rec = json.loads(lines[1])
    rec["payload"]["samples_us"] = "fast"
    lines[1] = json.dumps(rec)
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(LogCorruptError, match="line 2: event .* is invalid: samples_us"):
        read_envelopes(p)


def test_a_newer_event_in_a_log_is_refused_naming_the_line(tmp_path):
    log = RunLog.create(tmp_path, "r1")
    log.append([_sample(0), BuildFinished(candidate_id="c1", success=True, duration_ms=1.0)])
    p = tmp_path / "events.jsonl"
    lines = p.read_text().splitlines()
    rec = json.loads(lines[1])
    rec["schema_version"] = 7
    lines[1] = json.dumps(rec)
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(SchemaTooNewError, match="line 2: .*BuildFinished v7"):
        read_envelopes(p)


def test_acknowledged_batch_survives_kill_of_the_writer(tmp_path):
    """append returns only after fsync: once the child printed the seq, kill -9 cannot lose it."""
    code = (
        "import sys,time\n"
        "from tlxstore.runlog import RunLog\n"
        "from tlxstore.events import BuildFinished\n"
        f"log = RunLog.create({str(tmp_path)!r}, 'r1')\n"
        "for i in range(10**6):\n"
        "    log.append([BuildFinished(candidate_id=f'c{i}', success=True, duration_ms=1.0)] * 3)\n"
        "    print(log.next_seq, flush=True)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    acked = 0
    for line in proc.stdout:
        acked = int(line)
        if acked >= 30:
            break
    proc.kill()
    proc.wait()
    envs = read_envelopes(tmp_path)
    assert len(envs) >= acked and len(envs) % 3 == 0


def test_a_batch_validated_at_once_still_names_its_invalid_event_and_writes_nothing(tmp_path):
    log = RunLog.create(tmp_path, "r1")
    log.append([_sample(0)])
    before = (tmp_path / "events.jsonl").read_bytes()
    bypass = BenchmarkSampled.model_construct(
        candidate_id="c1", case_id="a", samples_us="many", type="BenchmarkSampled"
    )
    with pytest.raises(EventValidationError, match=r"BenchmarkSampled is invalid: samples_us"):
        log.append([_sample(1), bypass, _sample(2)])
    nan = BenchmarkSampled(candidate_id="c1", case_id="a", samples_us=[1.0, float("nan")])
    with pytest.raises(EventValidationError, match="BenchmarkSampled holds a non-finite number"):
        log.append([_sample(1), _sample(2), nan])
    assert (tmp_path / "events.jsonl").read_bytes() == before
    assert [e.seq for e in log.append([_sample(1)])] == [1]
