"""A tlxdb output folder read back as a TLX agent's folder (`tlxdb import` of the folder without
its events.jsonl) gives the run's experiments: every id, round, parent, source hash, outcome and
speedup. The run has each outcome: the host bundle's synthetic timing (100 us * 64 / BLOCK_SIZE)
makes them deterministic."""

from __future__ import annotations

import json

import pytest
from compat_cli import bundle, experiments, import_as_tlx, invoke, kernel
from support.scripted_provider import ScriptedProvider, replace, set_block

from optimizer.providers import registry
from tlxstore.events import Outcome

STEPS = [
    set_block(256),  # 25 us: 4x, promoted
    set_block(32),  # 200 us: slower than the incumbent, rejected
    replace("return x + y", "return x - y", {"answer": "x - y"}),  # a wrong answer: failed
]


@pytest.fixture
def three_outcomes():
    registry.register("scripted-outcomes", lambda options: ScriptedProvider(list(STEPS)))
    yield "scripted-outcomes"
    registry.unregister("scripted-outcomes")


def test_every_experiment_of_a_run_with_each_outcome_survives_the_tlx_importer(
    tmp_path, three_outcomes
):
    root = bundle("host_synthetic", tmp_path)
    budget = json.loads((root / "budget.json").read_text())
    (root / "budget.json").write_text(json.dumps({**budget, "max_rounds": len(STEPS)}))
    out, store = tmp_path / "out", tmp_path / "s.duckdb"
    r = invoke(
        [
            "optimize",
            "--kernel",
            kernel("host_add.py", tmp_path / "src"),
            "--bundle",
            root,
            "--store",
            store,
            "--output-dir",
            out,
            "--provider",
            three_outcomes,
            "--no-commit-winner",
        ]
    )
    assert r.exit_code == 0, r.stderr
    original = experiments(store, json.loads(r.stdout)["run_id"])
    assert {cid: e[4] for cid, e in original.items()} == {
        "baseline": None,
        "c001": Outcome.PROMOTED,
        "c002": Outcome.REJECTED,
        "c003": Outcome.FAILED,
    }
    assert len({e[2] for e in original.values()}) == 4  # four different sources
    imported_store, imported = import_as_tlx(out, tmp_path)
    assert experiments(imported_store, imported) == original
