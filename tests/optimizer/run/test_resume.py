"""A run killed with SIGKILL in the middle of a candidate resumes from its log and finishes,
with no lost and no repeated evaluation."""

import os
import signal
from pathlib import Path

import pytest
from support.drive_run import SCRIPT, start_held
from support.scripted_provider import ScriptedProvider

from optimizer.run import lifecycle
from optimizer.run.workspace import WORKSPACE_FILE
from tlxstore.events import BenchmarkSampled, BuildFinished, Outcome, Phase, StoppingReason
from tlxstore.fold import fold
from tlxstore.runlog import read_envelopes
from tlxstore.store import Store

pytestmark = pytest.mark.slow


def test_a_run_killed_mid_candidate_resumes_and_finishes_without_lost_or_repeated_work(tmp_path):
    proc = start_held(tmp_path, "BuildFinished:c002")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=120)
    log = tmp_path / "out" / "events.jsonl"
    before = read_envelopes(log)
    assert fold(before).finished is None
    killed_workspace = Path((tmp_path / "out" / WORKSPACE_FILE).read_text().strip())
    assert killed_workspace.parent == tmp_path and (killed_workspace / "bundle").is_dir()

    result = lifecycle.resume(
        str(tmp_path / "out"), tmp_path / "store.duckdb", provider=ScriptedProvider(list(SCRIPT))
    )

    assert not killed_workspace.exists()  # the killed run's workspace was removed
    assert not (tmp_path / "out" / WORKSPACE_FILE).exists()  # and so was the resume's own
    after = read_envelopes(log)
    assert after[: len(before)] == before  # nothing acknowledged was lost or rewritten
    state = fold(after)
    assert result.stopping_reason == StoppingReason.MAX_ROUNDS
    assert (
        state.finished is not None and state.finished.stopping_reason == StoppingReason.MAX_ROUNDS
    )
    cut = state.candidates["c002"]
    assert cut.decision.outcome == Outcome.FAILED and cut.failures[-1].stage == "interrupted"
    retry = state.candidates["c003"]
    assert (
        retry.proposal.source_hash == cut.proposal.source_hash
        and retry.proposal.round == cut.proposal.round
    )
    # every scripted candidate was evaluated to a decision exactly once (the cut one once more, whole)
    decided = [c for c in state.candidates.values() if c.decision and c.candidate_id != "c002"]
    assert sorted(c.proposal.knobs["BLOCK_SIZE"] for c in decided) == [128, 256, 512]
    complete = {}
    for e in (env.event for env in after):
        if isinstance(e, BenchmarkSampled) and e.phase == Phase.ROUND:
            complete.setdefault(e.candidate_id, set()).add(e.case_id)
    assert {c for c, cases in complete.items() if len(cases) == 2} >= {"c001", "c003", "c004"}
    assert (
        sum(
            1
            for env in after
            if isinstance(env.event, BuildFinished) and env.event.candidate_id == "c001"
        )
        == 1
    )
    assert len(Store(tmp_path / "store.duckdb").run_envelopes(state.run_id)) == len(after)
    with pytest.raises(
        lifecycle.NotResumableError,
        match=r"already finished \(max_rounds\); start a new run instead",
    ):
        lifecycle.resume(result.run_id, tmp_path / "store.duckdb", provider=ScriptedProvider([]))
