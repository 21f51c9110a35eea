"""One real run end to end on the CPU: vecadd on the Triton interpreter, a TLX-format bundle,
two rounds of two candidates from a scripted provider, through the library API."""

import json
from pathlib import Path

import pytest
from support.bundles import KERNEL
from support.runner import request
from support.scripted_provider import ScriptedProvider, constant, replace, set_block

from optimizer.reporting.result import EXIT_SUCCESS
from optimizer.run import lifecycle
from tlxstore.events import BuildFinished, DecisionMade, Outcome, StoppingReason
from tlxstore.fold import fold
from tlxstore.runlog import RunLog
from tlxstore.store import Store

pytestmark = pytest.mark.slow

BLOCK_256 = KERNEL.read_text().replace("BLOCK_SIZE = 64", "BLOCK_SIZE = 256")
SCRIPT = [
    set_block(256),
    constant(  # c001's source with another docstring and a comment: the same kernel, whoever the parent is
        BLOCK_256.replace("Element-wise vector add", "Vector add, reworded").replace(
            "BLOCK_SIZE = 256", "BLOCK_SIZE = 256  # a comment"
        ),
        {"comment": 1},
        "a docstring and a comment change nothing",
    ),
    replace("x + y, mask", "x - y, mask", {"op": "sub"}, "subtract instead of add (wrong)"),
    set_block(1024),
]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("loop")
    req = request(tmp, flags={"max_rounds": 2, "candidates_per_round": 2})
    provider = ScriptedProvider(list(SCRIPT))
    seen = []
    kernel_before = req.kernel.read_text()
    result = lifecycle.optimize(
        req, provider=provider, observer=lambda env, state: seen.append(env)
    )
    return {
        "req": req,
        "result": result,
        "provider": provider,
        "seen": seen,
        "kernel_before": kernel_before,
        "state": fold(RunLog.open(req.output_dir).envelopes()),
    }


def test_the_run_promotes_a_winner_that_survives_revalidation(run):
    r = run["result"]
    assert r.exit_code == EXIT_SUCCESS and r.success
    assert r.winner_id == "c004"
    assert r.stopping_reason == StoppingReason.MAX_ROUNDS
    assert r.speedup > 1.01 and r.ci_low > 1.0
    assert [x.outcome for x in r.experiments] == [
        Outcome.PROMOTED,
        Outcome.DUPLICATE,
        Outcome.FAILED,
        Outcome.PROMOTED,
    ]


def test_each_candidates_parent_is_the_current_best(run):
    parents = {c: s.proposal.parent_id for c, s in run["state"].candidates.items()}
    assert parents == {
        "baseline": None,
        "c001": "baseline",
        "c002": "c001",
        "c003": "c001",
        "c004": "c001",
    }


def test_a_reformatted_source_is_a_duplicate_reusing_the_earlier_result(run):
    c = run["state"].candidates["c002"]
    assert c.duplicate.match == "normalized" and c.duplicate.duplicate_of_candidate == "c001"
    assert c.decision.outcome == Outcome.DUPLICATE
    assert c.decision.speedup == run["state"].candidates["c001"].decision.speedup
    assert c.build is None and not c.samples  # never evaluated


def test_a_failed_candidate_is_excluded_with_its_signature_and_providers_see_it(run):
    c = run["state"].candidates["c003"]
    assert c.decision.outcome == Outcome.FAILED and "verification" in c.decision.reason
    assert c.exclusion.signature == "op=sub"
    last_ctx = run["provider"].contexts[-1]
    assert [e.signature for e in last_ctx.exclusions] == ["op=sub"]
    assert {m.candidate_id for m in last_ctx.measured} >= {"c001", "c002", "c003"}
    assert last_ctx.parent_id == "c001" and last_ctx.best_per_case


def test_every_event_is_in_the_store_and_in_the_log(run):
    state = run["state"]
    store = Store(run["req"].store)
    assert len(store.run_envelopes(state.run_id)) == state.last_seq + 1
    assert [e.seq for e in run["seen"]] == list(range(state.last_seq + 1))
    assert state.validation.passed
    assert {c.name for c in state.validation.checks} >= {
        "negative:unbuildable",
        "negative:wrong_output",
        "negative:wrong_answer",
    }


def test_the_output_folder_is_complete(run):
    out = Path(run["result"].output_dir)
    for name in ("events.jsonl", "best_kernel.py", "result.json", "report.md", "run_request.json"):
        assert (out / name).is_file(), name
    best = {"c001": "BLOCK_SIZE = 256", "c004": "BLOCK_SIZE = 1024"}[run["result"].winner_id]
    assert best in (out / "best_kernel.py").read_text()
    assert json.loads((out / "result.json").read_text()) == json.loads(
        run["result"].model_dump_json()
    )
    for cid in ("c001", "c002", "c003", "c004"):
        for name in ("kernel.py", "incremental.patch", "cumulative.patch"):
            assert (out / "experiments" / cid / name).is_file()
    inc = (out / "experiments" / "c004" / "incremental.patch").read_text()
    assert "-BLOCK_SIZE = 256" in inc and "+BLOCK_SIZE = 1024" in inc
    cum = (out / "experiments" / "c004" / "cumulative.patch").read_text()
    assert "-BLOCK_SIZE = 64" in cum and "+BLOCK_SIZE = 1024" in cum
    assert "| c003 |" in (out / "report.md").read_text()


def test_the_users_kernel_is_untouched(run):
    assert run["req"].kernel.read_text() == run["kernel_before"]


def test_each_candidate_is_built_once(run):
    builds = [
        e.event.candidate_id
        for e in run["seen"]
        if isinstance(e.event, BuildFinished) and e.event.candidate_id.startswith("c")
    ]
    winner = run["result"].winner_id
    assert sorted(builds) == sorted(
        ["c001", "c003", "c004", winner]
    )  # the winner again in revalidation
    decided = [e.event.candidate_id for e in run["seen"] if isinstance(e.event, DecisionMade)]
    assert decided == ["c001", "c002", "c003", "c004"]
