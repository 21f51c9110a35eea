"""Evidence across runs: dedup against every run in the store, --prior-run (a tlxdb output folder
and a TLX agent output folder) informs the provider but its winner is never adopted, and a
harness that hangs times out, the run goes on, and the timed-out source is not burned."""

from pathlib import Path

import pytest
from support.bundles import KERNEL, VECADD_CASES, kernel_copy, sleep_bundle
from support.runner import request
from support.scripted_provider import ScriptedProvider, constant, set_block

from optimizer.reporting.result import EXIT_NO_WINNER, EXIT_SUCCESS
from optimizer.run import lifecycle
from tlxstore.events import FailureKind, Outcome, StoppingReason
from tlxstore.fold import fold
from tlxstore.store import Store

pytestmark = pytest.mark.slow
TLX_RUN = Path(__file__).resolve().parent.parent.parent / "importers" / "fixtures" / "tlx_run"
HANGING_BUILD = """

_build = build


def build(kernel_source, target):
    if "TLXDB_TEST_HANG = True" in kernel_source:
        while True:
            pass
    return _build(kernel_source, target)
"""
HANG = KERNEL.read_text() + "\nTLXDB_TEST_HANG = True\n"  # code, not a comment: a new kernel


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("history")
    # samples fixed by BLOCK_SIZE, so that no decision here depends on how busy the machine is;
    # the time limit is only the hanging builds' (an honest evaluation ends far below it)
    bundle = sleep_bundle(
        tmp / "bundle", sleep_s=0, cases=VECADD_CASES, harness_append=HANGING_BUILD
    )
    kernel = kernel_copy(tmp / "src")
    flags = {"max_candidate_seconds": 30}
    first = lifecycle.optimize(
        request(
            tmp,
            bundle=bundle,
            kernel=kernel,
            output_dir=tmp / "run1",
            flags={**flags, "max_rounds": 1, "candidates_per_round": 1},
        ),
        provider=ScriptedProvider([set_block(256)]),
    )
    provider = ScriptedProvider(
        [
            constant(HANG, {"hang": 1}, "a source the harness hangs on"),
            constant(HANG, {"hang": 2}, "the same source again"),
            set_block(256),
        ]
    )
    second = lifecycle.optimize(
        request(
            tmp,
            bundle=bundle,
            kernel=kernel,
            output_dir=tmp / "run2",
            prior_runs=[str(tmp / "run1"), str(TLX_RUN)],
            flags={**flags, "max_rounds": 2, "candidates_per_round": 2},
        ),
        provider=provider,
    )
    store = Store(tmp / "store.duckdb")
    return {
        "first": first,
        "second": second,
        "provider": provider,
        "state": fold(store.run_envelopes(second.run_id)),
        "store": store,
    }


def test_the_first_run_has_a_winner(history):
    assert history["first"].exit_code == EXIT_SUCCESS and history["first"].winner_id == "c001"


def test_a_hanging_harness_times_out_and_the_run_goes_on(history):
    c = history["state"].candidates["c001"]
    assert c.failures[0].kind == FailureKind.TIMEOUT and c.failures[0].retryable
    assert c.decision.outcome == Outcome.FAILED and "timeout" in c.decision.reason
    assert "c003" in history["state"].candidates


def test_a_timed_out_source_is_not_burned(history):
    state = history["state"]
    again = state.candidates["c002"]
    assert again.proposal.source_hash == state.candidates["c001"].proposal.source_hash
    assert again.duplicate is None and again.failures[0].kind == FailureKind.TIMEOUT
    assert state.candidates["c001"].exclusion is None  # an infrastructure failure excludes nothing


def test_a_source_measured_in_another_run_is_a_duplicate_and_not_measured_again(history):
    c = history["state"].candidates["c003"]
    assert c.duplicate.duplicate_of_run == history["first"].run_id
    assert c.duplicate.duplicate_of_candidate == "c001" and c.duplicate.match == "raw"
    assert c.decision.outcome == Outcome.DUPLICATE and c.decision.speedup is not None
    assert c.build is None and not c.samples


def test_a_prior_runs_winner_is_never_adopted(history):
    second, state = history["second"], history["state"]
    assert second.exit_code == EXIT_NO_WINNER and second.winner_id is None
    assert second.stopping_reason == StoppingReason.SEARCH_EXHAUSTED
    assert all(c.proposal.parent_id in (None, "baseline") for c in state.candidates.values())
    assert (
        len(state.started.prior_runs) == 2 and history["first"].run_id in state.started.prior_runs
    )


def test_prior_runs_reach_the_provider_context(history):
    ctx = history["provider"].contexts[0]
    assert [m.candidate_id for m in ctx.prior_best][:1] == ["c001"]
    runs_seen = {m.run_id for m in ctx.measured}
    assert history["first"].run_id in runs_seen
    assert len(runs_seen) >= 2  # the TLX agent import too, though measured elsewhere
