"""The views of the machine's state: every query of docs/STORE.md ("The machine's state"), run as
written there on a store holding a run whose benchmark calls ran in recorded machine states, and
the view's list of degrading reasons held equal to the decision's."""

from __future__ import annotations

import re
from pathlib import Path

from support import machine as m

import queries
from optimizer.decision import machine
from tlxstore.events import BASELINE_ID, Event, RunEnvironment
from tlxstore.store import Store
from tlxstore.testing import ingest_run

DOC = Path(__file__).resolve().parents[2] / "docs" / "STORE.md"
QUESTIONS = dict(
    re.findall(r"<!-- machine question: (\w+) -->\n[^\n]*\n```sql\n(.*?)```", DOC.read_text(), re.S)
)


def _store(tmp_path) -> Store:
    events: list[Event] = [*m.started(), *m.proposal("c001", 512), *m.verified("c001", ("decode",))]
    events.insert(
        1, RunEnvironment(source="nvml", driver_version="580.159.04", cpu_affinity=[0, 1])
    )
    kinds = {("c001", 1): "degrading", (BASELINE_ID, 2): "shared", ("c001", 3): "capped"}
    for b in range(4):
        for cid in ("c001", BASELINE_ID):
            events += m.call(
                cid, "decode", "c001", b, [float(b), b + 0.5], kinds.get((cid, b), "quiet")
            )
    store = Store(tmp_path / "s.duckdb")
    ingest_run(store, "r-machine", events)
    return store


def test_the_documented_machine_questions_are_answered(tmp_path):
    store = _store(tmp_path)
    assert set(QUESTIONS) == {"marked_samples", "clocks"}
    rows = queries.query(store, QUESTIONS["marked_samples"]).to_pylist()
    assert [(r["candidate_id"], r["block"], r["samples_us"]) for r in rows] == [
        ("c001", 1, [1.0, 1.5]),
        (BASELINE_ID, 2, [2.0, 2.5]),
    ]
    assert "hw_slowdown" in rows[0]["reasons"] and '"pid":' in rows[1]["neighbours"]
    clocks = queries.query(store, QUESTIONS["clocks"]).to_pylist()
    quiet, shared = m.state("quiet")["sm_clock_min_mhz"], m.state("shared")["sm_clock_min_mhz"]
    capped, slowed = m.state("capped")["sm_clock_min_mhz"], m.state("degrading")["sm_clock_min_mhz"]
    assert clocks == [
        {"candidate_id": BASELINE_ID, "sm_clock_min_mhz": min(quiet, shared), "marked_calls": 1},
        {"candidate_id": "c001", "sm_clock_min_mhz": min(quiet, capped, slowed), "marked_calls": 1},
    ]
    [env] = queries.query(store, "SELECT * FROM run_environments").to_pylist()
    assert env["driver_version"] == "580.159.04" and env["cpu_affinity"] == [0, 1]


def test_the_view_marks_by_the_same_degrading_reasons_as_the_decision(tmp_path):
    sql = (Path(queries.__file__).parent / "views" / "machine_states.sql").read_text()
    listed = re.search(r"list_has_any\(json_keys\(reasons\), \[(.*?)\]\)", sql, re.S)
    assert listed is not None
    assert re.findall(r"'(\w+)'", listed.group(1)) == list(machine.DEGRADING_REASONS)


def test_each_instance_of_a_second_window_keeps_its_own_calls_and_samples(tmp_path):
    """A second window measures several builds of each member under one candidate id, window and
    block; the views tell them apart by `instance` (store schema v9). Joined without it, every
    machine state of a block met every instance's samples: 3 x 3 rows for 3 instances."""
    events: list[Event] = [*m.started(), *m.proposal("c001", 512), *m.verified("c001", ("decode",))]
    kinds = {2: "degrading"}
    for instance in (1, 2, 3):
        for cid in ("c001", BASELINE_ID):
            samples = [10.0 * instance, 10.0 * instance + 1]
            events += m.call(
                cid, "decode", "c001.remeasure", 0, samples, kinds.get(instance, "quiet"),
                instance=instance,
            )  # fmt: skip
    store = Store(tmp_path / "s.duckdb")
    ingest_run(store, "r-instances", events)
    rows = queries.query(
        store,
        "SELECT instance, samples_us, marked FROM machine_states "
        "WHERE candidate_id = 'c001' ORDER BY instance",
    ).to_pylist()
    assert rows == [
        {"instance": 1, "samples_us": [10.0, 11.0], "marked": False},
        {"instance": 2, "samples_us": [20.0, 21.0], "marked": True},
        {"instance": 3, "samples_us": [30.0, 31.0], "marked": False},
    ]
    per_instance = queries.query(
        store,
        "SELECT instance, list(sample_us ORDER BY sample_index) AS s FROM samples "
        "WHERE candidate_id = 'c001' GROUP BY instance ORDER BY instance",
    ).to_pylist()
    assert [r["s"] for r in per_instance] == [[10.0, 11.0], [20.0, 21.0], [30.0, 31.0]]
