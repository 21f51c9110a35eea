"""The model-driven providers through the real loop and CLI: `tlxdb optimize` on the vecadd
fixture bundle (Triton interpreter), a real OpenAI-compatible server on 127.0.0.1, a real script
agent, and a recorded run measured again (remeasure) from the same DuckDB store."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from support.bundles import BLOCK_AGENT as AGENT
from test_reply_parser import candidate

from cli.main import main
from queries import query
from tlxstore.events import (
    CandidateProposed,
    DecisionMade,
    DuplicateDetected,
    InfrastructureFailed,
    ModelExchanged,
    Outcome,
)
from tlxstore.fold import fold
from tlxstore.runlog import RunLog
from tlxstore.store import Store

pytestmark = (
    pytest.mark.slow
)  # each test is a whole run (or two) on the Triton interpreter: ~12 s each

FIXTURES = Path(__file__).resolve().parent.parent.parent / "fixtures"
KERNEL_TEXT = (FIXTURES / "vecadd_kernel.py").read_text()
FASTER_KERNEL = KERNEL_TEXT.replace("BLOCK_SIZE = 64", "BLOCK_SIZE = 1024")
# The candidate is ~10x faster on the interpreter; the CV bound is loose because two shared CPU
# cores make interpreter timings noisy, and these tests are about the providers, not the policy.
FAST_FLAGS = ["--benchmark-repetitions", "8", "--max-cv", "3.0", "--max-candidate-seconds", "60"]


def optimize(tmp: Path, name: str, *args: str) -> tuple[Result, Path]:
    bundle = tmp / f"{name}-bundle"
    shutil.copytree(FIXTURES / "vecadd_bundle", bundle)
    kernel = tmp / f"{name}-src" / "vecadd_kernel.py"
    kernel.parent.mkdir()
    kernel.write_text(KERNEL_TEXT)
    out = tmp / f"{name}-out"
    argv = [
        "optimize",
        "--kernel",
        str(kernel),
        "--bundle",
        str(bundle),
        "--store",
        str(tmp / "store.duckdb"),
        "--output-dir",
        str(out),
        "--no-commit-winner",
        "--max-rounds",
        "1",
        "--candidates-per-round",
        "1",
        "--result-format",
        "summary",
        *FAST_FLAGS,
        *args,
    ]
    return CliRunner().invoke(main, argv, catch_exceptions=False), out


def events(out: Path):
    return [e.event for e in RunLog.open(out).envelopes()]


def test_llm_against_a_local_server_produces_a_promoted_candidate(
    tmp_path, openai_server, monkeypatch
):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-e2e-000000")
    monkeypatch.delenv("OPENAI_API_BASE", raising=False)  # the server is reached by --api-base only
    openai_server.enqueue("Raise BLOCK_SIZE to 1024.")  # malformed: retried with the reason
    openai_server.enqueue(
        json.dumps(candidate(source=FASTER_KERNEL)), prompt_tokens=2000, completion_tokens=400
    )

    result, out = optimize(
        tmp_path,
        "llm",
        "--provider",
        "llm",
        "--model",
        "openai/local-model",
        "--api-base",
        openai_server.api_base,
    )

    assert result.exit_code == 0, result.output
    evs = events(out)
    exchanges = [e for e in evs if isinstance(e, ModelExchanged)]
    assert [(x.attempt, x.error is None) for x in exchanges] == [(1, False), (2, True)]
    [proposal] = [
        e for e in evs if isinstance(e, CandidateProposed) and e.candidate_id != "baseline"
    ]
    assert proposal.provider == "llm" and proposal.exchange_id == exchanges[1].exchange_id
    assert (
        proposal.tokens_in
        and proposal.tokens_in >= 2000
        and proposal.hypothesis_kind == "launch_config"
    )
    [decision] = [
        e for e in evs if isinstance(e, DecisionMade) and e.candidate_id == proposal.candidate_id
    ]
    assert decision.outcome == Outcome.PROMOTED
    assert (out / "best_kernel.py").read_text() == FASTER_KERNEL
    # the prompt carried the bundle's guidance and the kernel whole
    first_prompt = openai_server.requests[0]["messages"][1]["content"]
    assert "BLOCK_SIZE is the only knob" in first_prompt and KERNEL_TEXT.rstrip() in first_prompt
    # the exchanges are in the store's view, without the key
    table = query(
        Store(tmp_path / "store.duckdb"),
        "SELECT attempt, error, prompt, reply FROM model_exchanges ORDER BY attempt",
    )
    assert table.column("attempt").to_pylist() == [1, 2]
    assert "sk-local-e2e-000000" not in json.dumps(table.to_pylist())


@pytest.fixture(scope="module")
def command_run(tmp_path_factory) -> tuple[Result, Path, str]:
    """One run of the command agent that writes the faster kernel (its store: the folder's
    store.duckdb): the command test asserts on it, the remeasure test measures it again."""
    tmp = tmp_path_factory.mktemp("command")
    script = tmp / "agent.py"
    script.write_text(AGENT)
    cmd = f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"
    result, out = optimize(tmp, "cmd", "--provider", "command", "--provider-command", cmd)
    return result, out, cmd


def test_command_agent_writing_a_faster_candidate_is_promoted(command_run):
    result, out, cmd = command_run

    assert result.exit_code == 0, result.output
    evs = events(out)
    [proposal] = [
        e for e in evs if isinstance(e, CandidateProposed) and e.candidate_id != "baseline"
    ]
    assert proposal.provider == "command" and proposal.commit_title == "Use 1024-element blocks"
    [exchange] = [e for e in evs if isinstance(e, ModelExchanged)]
    assert (
        exchange.model == cmd
        and exchange.error is None
        and proposal.exchange_id == exchange.exchange_id
    )
    assert [
        e.outcome
        for e in evs
        if isinstance(e, DecisionMade) and e.candidate_id == proposal.candidate_id
    ] == [Outcome.PROMOTED]


def test_a_failing_command_agent_is_recorded_and_the_run_ends_without_a_winner(tmp_path):
    script = tmp_path / "broken_agent.py"
    script.write_text(
        "import sys\nprint('error: no credentials for the model', file=sys.stderr)\nsys.exit(2)\n"
    )
    cmd = f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"

    result, out = optimize(tmp_path, "broken", "--provider", "command", "--provider-command", cmd)

    assert result.exit_code == 2, result.output
    evs = events(out)
    failures = [e for e in evs if isinstance(e, InfrastructureFailed) and e.stage == "propose"]
    assert failures and all(f.retryable for f in failures)
    assert (
        "exited with status 2" in failures[0].diagnostics
        and "no credentials for the model" in failures[0].diagnostics
    )
    exchanges = [e for e in evs if isinstance(e, ModelExchanged)]
    assert len(exchanges) == len(failures) and all(
        "no credentials" in (x.error or "") for x in exchanges
    )
    assert not [e for e in evs if isinstance(e, CandidateProposed) and e.candidate_id != "baseline"]


@pytest.mark.parametrize(
    "spelling",
    [("--provider", "remeasure", "--remeasure-run"), ("--provider", "replay", "--replay-run")],
    ids=["remeasure", "former-replay"],
)
def test_remeasure_measures_a_recorded_runs_candidates_in_a_new_run(
    tmp_path, command_run, spelling
):
    """`--provider remeasure --remeasure-run RUN`; the former spelling, `--provider replay
    --replay-run RUN`, runs the same provider and says in one line each that it was renamed."""
    first, first_out, _ = command_run  # the recorded run
    assert first.exit_code == 0, first.output
    recorded = fold(RunLog.open(first_out).envelopes())
    shutil.copy(first_out.parent / "store.duckdb", tmp_path / "store.duckdb")
    assert Store(tmp_path / "store.duckdb").run_ids() == [recorded.run_id]

    result, out = optimize(tmp_path, "again", *spelling, recorded.run_id, "--max-rounds", "2")

    assert result.exit_code == 0, result.output
    renamed = [line for line in result.stderr.splitlines() if "renamed" in line]
    assert renamed == (
        []
        if spelling[1] == "remeasure"
        else [
            "note: --provider replay is renamed --provider remeasure",
            "note: --replay-run is renamed --remeasure-run",
        ]
    )
    state = fold(RunLog.open(out).envelopes())
    again = [c for c in state.candidates.values() if c.candidate_id != "baseline"]
    originals = [c for c in recorded.candidates.values() if c.candidate_id != "baseline"]
    assert [c.proposal.remeasures for c in again] == [
        f"{recorded.run_id}/{c.candidate_id}" for c in originals
    ]
    assert [c.proposal.source_hash for c in again] == [c.proposal.source_hash for c in originals]
    assert [c.proposal.hypothesis for c in again] == [c.proposal.hypothesis for c in originals]
    assert state.started is not None and state.started.provider == "remeasure"
    # measured again, not reported as a duplicate of the recorded run
    assert all(c.duplicate is None and c.samples for c in again)
    assert [c.decision.outcome for c in again if c.decision] == [Outcome.PROMOTED]
    assert not [e for e in events(out) if isinstance(e, DuplicateDetected)]
    summary = json.loads(result.stdout)
    assert summary["stopping_reason"] == "search_exhausted"
