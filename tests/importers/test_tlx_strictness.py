"""`tlxdb import` of a TLX agent folder refuses a wrong-typed field with the field named (never
coerces or drops it), and never imports a promotion its own evidence contradicts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import main
from tlxstore.events import DecisionMade, Outcome
from tlxstore.store import Store

FIXTURE = Path(__file__).parent / "fixtures" / "tlx_run"


def _folder(tmp: Path, edit) -> Path:
    dest = Path(shutil.copytree(FIXTURE, tmp / "tlx_run"))
    items = json.loads((dest / "experiments.json").read_text())
    edit(items[1])
    (dest / "experiments.json").write_text(json.dumps(items))
    return dest


def _import(tmp: Path, folder: Path):
    store = tmp / "s.duckdb"
    r = CliRunner().invoke(main, ["import", str(folder), "--store", str(store)])
    return r, store


def _case(item, i=0):
    return item["performance"]["cases"][i]


BAD = [
    (
        lambda it: _case(it)["timing"].update(samples_us="1 2 3"),
        'performance.cases[0].timing.samples_us must be a non-empty list of microseconds, got "1 2 3"',
    ),
    (
        lambda it: _case(it)["verification"].update(passed="yes"),
        'performance.cases[0].verification.passed must be true or false, got "yes"',
    ),
    (
        lambda it: it.update(round_index="7"),
        'round_index must be a non-negative integer, got "7"',
    ),
    (
        lambda it: _case(it, 1)["timing"].update(samples_us=[80.0, -1.0]),
        "performance.cases[1].timing.samples_us must be positive finite numbers, got -1.0",
    ),
    (
        lambda it: it.update(hypothesis=["bigger", "tiles"]),
        'hypothesis must be a string, got ["bigger", "tiles"]',
    ),
]


@pytest.mark.parametrize(("edit", "message"), BAD)
def test_a_wrong_typed_field_is_refused_with_the_field_named(tmp_path, edit, message):
    folder = _folder(tmp_path, edit)
    r, store = _import(tmp_path, folder)
    assert r.exit_code == 1
    assert r.stderr.strip() == (
        f"Error: {folder / 'experiments.json'}: experiment r001-c000: {message}"
    )
    assert not store.exists() or Store(store).query("SELECT run_id FROM runs").num_rows == 0


def _decision(store: Path, candidate_id: str) -> DecisionMade:
    s = Store(store)
    [run_id] = s.query("SELECT run_id FROM runs").column("run_id").to_pylist()
    [d] = [
        e.event
        for e in s.run_envelopes(run_id)
        if isinstance(e.event, DecisionMade) and e.event.candidate_id == candidate_id
    ]
    return d


def _all_failed(item):
    item["performance"]["aggregate_speedup"] = 1e308
    for case in item["performance"]["cases"]:
        case["verification"]["passed"] = False


def test_a_promotion_whose_cases_all_failed_verification_imports_as_rejected(tmp_path):
    r, store = _import(tmp_path, _folder(tmp_path, _all_failed))
    assert r.exit_code == 0, r.stderr
    d = _decision(store, "r001-c000")
    assert d.outcome == Outcome.REJECTED and d.speedup is None
    assert d.reason == (
        "TLX agent status promoted, contradicted by its evidence: no case passed verification"
    )


def test_a_promotion_with_one_case_that_failed_verification_imports_as_rejected_naming_it(
    tmp_path,
):
    r, store = _import(
        tmp_path, _folder(tmp_path, lambda it: _case(it, 1)["verification"].update(passed=False))
    )
    assert r.exit_code == 0, r.stderr
    d = _decision(store, "r001-c000")
    assert d.outcome == Outcome.REJECTED and d.speedup is None
    assert d.reason == (
        "TLX agent status promoted, contradicted by its evidence: case large failed verification"
    )


@pytest.mark.parametrize("status", ["signal_recorded", "needs_human"])
def test_the_newer_tlx_statuses_import_as_not_promoted(tmp_path, status):
    r, store = _import(tmp_path, _folder(tmp_path, lambda it: it.update(status=status)))
    assert r.exit_code == 0, r.stderr
    d = _decision(store, "r001-c000")
    assert d.outcome == Outcome.REJECTED and d.reason == f"TLX agent status: {status}"
