"""Logs written by released tlxdb versions keep loading, forever; upcasters carry them forward.

golden/v1 holds one of every event type released with the first tlxdb, as it wrote them; an
event type added later is in the first golden log written after it: golden/v7 (store schema v7),
a run as that tlxdb writes it (the machine's state per benchmark call, the run's environment, and
the current versions of the types before them), which must load as long as v1 does. golden/v8
(store schema v8) is the same run as the next tlxdb writes it: RunStarted v3, with its cases'
parameters, history_seeds and a prior run, and CandidateProposed v2 (`remeasures`, v1's
`replays`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import pytest

from tlxstore import codec
from tlxstore.codec import Codec
from tlxstore.errors import EventValidationError
from tlxstore.events import EVENT_TYPES, CandidateProposed, Event
from tlxstore.fold import fold
from tlxstore.runlog import read_envelopes
from tlxstore.upcasting import Upcasters

GOLDEN = Path(__file__).parent / "golden"
LOGS = ("v1", "v7", "v8")
ADDED_SINCE_V1 = {"MachineSampled": "v7", "RunEnvironment": "v7"}  # type -> its first golden log


def _records(version: str) -> list[dict]:
    return [
        json.loads(line) for line in (GOLDEN / version / "events.jsonl").read_text().splitlines()
    ]


def test_golden_v1_log_holds_every_event_type_released_with_it():
    assert {r["type"] for r in _records("v1")} == set(EVENT_TYPES) - set(ADDED_SINCE_V1)


def test_every_event_type_added_since_v1_is_in_its_golden_log():
    assert set(ADDED_SINCE_V1) <= set(EVENT_TYPES)
    for event_type, log in ADDED_SINCE_V1.items():
        assert event_type in {r["type"] for r in _records(log)}, event_type


def test_the_golden_logs_hold_every_event_type():
    assert set().union(*({r["type"] for r in _records(v)} for v in LOGS)) == set(EVENT_TYPES)


def test_golden_v7_log_loads_and_folds_with_its_machine_states_and_environment():
    state = fold(read_envelopes(GOLDEN / "v7"))
    assert state.run_id == "r20261204-090000-a7c0de"
    assert state.finished is not None and state.finished.winner_id == "c001"
    [env] = state.environments
    assert env.driver_version == "580.159.04" and env.cpu_affinity == list(range(16))
    machine = state.candidates["baseline"].machine
    assert [(m.window_id, m.block) for m in machine] == [("baseline", 0), ("c001", 0), ("c001", 1)]
    assert machine[2].neighbours[0].pid == 4242
    assert state.revalidations[0].replicate_speedups == [1.6667, 1.665, 1.668]


def test_golden_v8_log_loads_and_folds_with_its_case_parameters_and_history_seeds():
    state = fold(read_envelopes(GOLDEN / "v8"))
    assert state.started is not None and state.finished is not None
    assert state.started.case_parameters == {"n2048": {"n": 2048, "dtype": "float16"}}
    assert state.started.thresholds.history_seeds == 2
    assert state.started.prior_runs == ["r20261204-090000-a7c0de"]
    assert state.started.thresholds.replicates == 3  # v7's keys kept beside it
    assert state.candidates["c001"].proposal.remeasures == "r20261204-090000-a7c0de/c001"


def test_a_v1_proposal_that_replays_a_candidate_reads_as_remeasuring_it():
    """CandidateProposed v1 named the recorded candidate it measures again `replays`."""
    rec = next(r for r in _records("v1") if r["type"] == "CandidateProposed")
    rec.pop("batch_last")
    rec["payload"]["replays"] = "r20261130-120000-aaaaaa/c004"
    env = codec.decode(rec)
    assert isinstance(env.event, CandidateProposed)
    assert env.event.remeasures == "r20261130-120000-aaaaaa/c004"
    again = codec.encode(env)
    assert again["schema_version"] == 2 and "replays" not in again["payload"]
    assert again["payload"]["remeasures"] == "r20261130-120000-aaaaaa/c004"


def test_a_v7_run_started_is_carried_to_v3_as_seeding_nothing():
    """golden/v7's RunStarted is v2: it recorded no parameters and seeded nothing."""
    [rec] = [r for r in _records("v7") if r["type"] == "RunStarted"]
    assert rec["schema_version"] == 2
    state = fold(read_envelopes(GOLDEN / "v7"))
    assert state.started is not None
    assert state.started.case_parameters == {}
    assert state.started.thresholds.history_seeds == 0
    assert state.started.thresholds.replicate_tolerance == 0.02


def test_golden_v1_log_loads_and_folds():
    envs = read_envelopes(GOLDEN / "v1")
    state = fold(envs)
    assert state.run_id == "r20261130-130000-abcdef"
    assert state.finished is not None and state.finished.winner_id == "c001"
    assert state.candidates["c001"].exclusion is not None


@pytest.mark.parametrize("log", LOGS)
def test_golden_records_keep_every_value_when_reencoded(log):
    """Optional fields added since (with defaults) may appear and an upcast record is written at
    its type's current version; nothing recorded may change."""
    for rec in _records(log):
        rec.pop("batch_last")
        again = codec.encode(codec.decode(rec))
        assert again["schema_version"] == EVENT_TYPES[rec["type"]].SCHEMA_VERSION
        assert {k: v for k, v in again.items() if k not in ("payload", "schema_version")} == {
            k: v for k, v in rec.items() if k not in ("payload", "schema_version")
        }
        assert _kept(_renamed(rec["type"], rec["payload"]), again["payload"])


def test_released_upcasters_carry_v1_runs_to_what_they_meant():
    """A v1 run was decided under the TLX agent's CV gate with no extra measurement, its samples
    were measured alone, and whether its decisions measured their source is left to the store."""
    state = fold(read_envelopes(GOLDEN / "v1"))
    assert state.started is not None
    assert state.started.thresholds.strict_noise is True
    assert state.started.thresholds.max_extra_blocks == 0
    assert state.started.thresholds.history_seeds == 0  # v3: an older run seeded nothing
    assert state.started.case_parameters == {}  # and recorded no parameters
    assert all(s.window_id is None for c in state.candidates.values() for s in c.samples)
    decided = [c.decision for c in state.candidates.values() if c.decision is not None]
    assert decided and all(d.measured is None and d.notes == [] for d in decided)
    assert all(r.notes == [] for r in state.revalidations)


RENAMED_FIELDS = {("CandidateProposed", "replays"): "remeasures"}  # v1 name -> v2 name


def _renamed(event_type: str, payload: dict) -> dict:
    """`payload` with the fields renamed since it was written under their current names."""
    return {RENAMED_FIELDS.get((event_type, k), k): v for k, v in payload.items()}


def _kept(old, new) -> bool:
    """Every value of `old` is in `new` (dicts may have gained keys, at any depth)."""
    if isinstance(old, dict):
        return isinstance(new, dict) and all(k in new and _kept(v, new[k]) for k, v in old.items())
    if isinstance(old, list):
        return isinstance(new, list) and len(old) == len(new) and all(map(_kept, old, new))
    return old == new


class CaseVerifiedV2(Event):
    """A hypothetical next version: `passed: bool` becomes `verdict: "pass" | "fail"`."""

    SCHEMA_VERSION = 2
    type: Literal["CaseVerified"] = "CaseVerified"
    candidate_id: str
    case_id: str
    verdict: Literal["pass", "fail"]
    phase: str = "round"
    attempt: int = 1
    seed: int | None = None
    diagnostics: str = ""
    metrics: dict[str, float | None] = {}


def upcast_v1_v2(payload: dict) -> dict:
    payload["verdict"] = "pass" if payload.pop("passed") else "fail"
    return payload


def test_an_upcaster_carries_golden_v1_payloads_to_a_new_version():
    v2 = Codec(
        event_types={**EVENT_TYPES, "CaseVerified": CaseVerifiedV2},
        upcasters=Upcasters({("CaseVerified", 1): upcast_v1_v2}),
    )
    rec = next(r for r in _records("v1") if r["type"] == "CaseVerified")
    rec.pop("batch_last")
    env = v2.decode(rec)
    assert isinstance(env.event, CaseVerifiedV2) and env.event.verdict == "pass"
    assert v2.encode(env)["schema_version"] == 2


def test_a_missing_upcaster_is_an_error_not_a_silent_pass():
    v2 = Codec(event_types={**EVENT_TYPES, "CaseVerified": CaseVerifiedV2})
    rec = next(r for r in _records("v1") if r["type"] == "CaseVerified")
    rec.pop("batch_last")
    with pytest.raises(EventValidationError, match="no upcaster for CaseVerified v1 -> v2"):
        v2.decode(rec)
