"""The command provider runs a real external agent (a script) in a fresh workspace."""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path

import pytest
from conftest import FASTER_SOURCE, make_context

from optimizer.providers import ProviderOptions
from optimizer.providers.base import Proposal, ProviderError
from optimizer.providers.command import CommandOptions, CommandProvider, create
from optimizer.providers.prompts.render import PromptMode, render_prompt
from optimizer.providers.prompts.reply import parse_metadata
from tlxstore.errors import ConfigError
from tlxstore.events import ModelExchanged

FASTER_AGENT = """
import json, pathlib, sys
prompt = sys.stdin.read()
here = pathlib.Path(".")
assert prompt == (here / "prompt.md").read_text(), "stdin must carry prompt.md"
assert (here / "original.py").read_text() == (here / "candidate.py").read_text()
src = (here / "candidate.py").read_text()
(here / "candidate.py").write_text(src.replace("BLOCK=64", "BLOCK=1024").replace("cdiv(n, 64)", "cdiv(n, 1024)"))
(here / "candidate_metadata.json").write_text(json.dumps({
    "hypothesis": "64-element programs make the launch grid the bottleneck",
    "evidence": "19.7 GB/s on n65536",
    "change": "BLOCK 64 -> 1024",
    "expected_effect": "several times faster on n65536",
    "risk": "register pressure",
    "hypothesis_kind": "launch_config",
    "commit_title": "Use 1024-element blocks",
}))
print("agent: raised BLOCK to 1024")
print("workspace files:", sorted(p.name for p in here.iterdir()))
"""


def agent(tmp_path: Path, body: str, name: str = "agent.py") -> str:
    script = tmp_path / name
    script.write_text(body)
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"


def provider(command: str, **kw) -> CommandProvider:
    return CommandProvider(CommandOptions(command=command, **kw))


def test_an_agent_that_edits_the_candidate_proposes_it_with_its_metadata(tmp_path, context):
    events: list[ModelExchanged] = []
    p = provider(agent(tmp_path, FASTER_AGENT), workspace=tmp_path / "run")
    proposal = p.propose(context, events.append)

    assert isinstance(proposal, Proposal) and proposal.source == FASTER_SOURCE
    assert proposal.hypothesis == "64-element programs make the launch grid the bottleneck"
    assert (
        proposal.hypothesis_kind == "launch_config"
        and proposal.commit_title == "Use 1024-element blocks"
    )
    [ex] = events
    assert ex.provider == "command" and ex.model == p.model and ex.error is None
    assert ex.exchange_id == proposal.exchange_id and "raised BLOCK to 1024" in (ex.reply or "")
    assert "## Your task" in ex.prompt
    [workspace] = (tmp_path / "run" / "agents").iterdir()
    assert "['candidate.py', 'candidate_metadata.json', 'original.py', 'prompt.md']" in (
        ex.reply or ""
    )
    assert (workspace / "candidate.py").read_text() == FASTER_SOURCE


def test_the_reference_kernel_is_in_the_workspace_when_the_bundle_has_one(tmp_path):
    body = 'import pathlib,sys; sys.stdin.read(); assert pathlib.Path("reference_kernel.py").read_text() == "REF = 1\\n"\n'
    body += 'p = pathlib.Path("candidate.py"); p.write_text(p.read_text() + "\\nX = 1\\n")\n'
    proposal = provider(agent(tmp_path, body)).propose(
        make_context(reference_source="REF = 1\n"), lambda e: None
    )
    assert isinstance(proposal, Proposal) and proposal.source.endswith("X = 1\n")
    assert proposal.hypothesis.startswith("not stated")


def test_a_failing_agent_is_a_recorded_provider_error_with_its_last_stderr_lines(tmp_path, context):
    body = "import sys\nfor i in range(40): print(f'progress line {i}', file=sys.stderr)\nprint('fatal: model quota exceeded', file=sys.stderr)\nsys.exit(3)\n"
    events: list[ModelExchanged] = []
    with pytest.raises(ProviderError) as err:
        provider(agent(tmp_path, body), stderr_tail_lines=3).propose(context, events.append)
    message = err.value.message
    assert "exited with status 3" in message
    assert "progress line 38 | progress line 39 | fatal: model quota exceeded" in message
    assert "progress line 36" not in message and "\n" not in message
    [ex] = events
    assert ex.error and "fatal: model quota exceeded" in ex.error


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (
            "import pathlib; pathlib.Path('original.py').write_text('cheat = 1\\n')\n",
            "modified original.py",
        ),
        ("pass\n", "left candidate.py unchanged"),
        ("import pathlib; pathlib.Path('candidate.py').unlink()\n", "removed candidate.py"),
        (
            "import pathlib; p = pathlib.Path('candidate.py'); p.write_text(p.read_text() + '#x\\n')\n"
            'pathlib.Path(\'candidate_metadata.json\').write_text(\'{"hypothesis": "", "mood": 1}\')\n',
            "candidate_metadata.json is invalid",
        ),
    ],
    ids=["edited-original", "unchanged", "removed", "bad-metadata"],
)
def test_agents_that_break_the_rules_are_refused(tmp_path, context, body, reason):
    events: list[ModelExchanged] = []
    with pytest.raises(ProviderError, match=reason):
        provider(agent(tmp_path, body)).propose(context, events.append)
    assert events[0].error and reason in events[0].error


def test_an_agent_past_its_timeout_is_killed_with_its_children(tmp_path, context):
    marker = tmp_path / "grandchild-survived"
    grandchild = agent(
        tmp_path,
        f"import time, pathlib\ntime.sleep(3)\npathlib.Path({str(marker)!r}).touch()\n",
        "grandchild.py",
    )
    body = (
        f"import subprocess, time\nsubprocess.Popen({grandchild!r}, shell=True)\ntime.sleep(60)\n"
    )
    started = time.monotonic()
    with pytest.raises(ProviderError, match="timed out after 1 s"):
        provider(agent(tmp_path, body), agent_timeout_s=1).propose(context, lambda e: None)
    assert time.monotonic() - started < 10
    time.sleep(3.5)
    assert not marker.exists()


def test_secrets_in_agent_output_never_reach_the_event(tmp_path, context, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret-value-42")
    body = "import os, sys; print('using', os.environ['ANTHROPIC_API_KEY']); print('key', os.environ['ANTHROPIC_API_KEY'], file=sys.stderr); sys.exit(1)\n"
    events: list[ModelExchanged] = []
    with pytest.raises(ProviderError) as err:
        provider(agent(tmp_path, body)).propose(context, events.append)
    assert "sk-ant-secret-value-42" not in err.value.message
    assert "sk-ant-secret-value-42" not in events[0].model_dump_json()
    assert "using [redacted]" in (events[0].reply or "")


def test_the_workspace_is_fresh_for_every_proposal(tmp_path, context):
    body = (
        "import pathlib, sys; sys.stdin.read()\n"
        "assert not pathlib.Path('leftover.txt').exists()\n"
        "pathlib.Path('leftover.txt').write_text('x')\n"
        "p = pathlib.Path('candidate.py'); p.write_text(p.read_text() + '#edit\\n')\n"
    )
    p = provider(agent(tmp_path, body), workspace=tmp_path / "run")
    for _ in range(2):
        assert isinstance(p.propose(context, lambda e: None), Proposal)
    assert len(list((tmp_path / "run" / "agents").iterdir())) == 2


def test_create_takes_the_registry_options_and_names_the_missing_flag(tmp_path):
    p = create(ProviderOptions(command="codex exec", workspace=tmp_path))
    assert p.model == "codex exec" and p.options.workspace == tmp_path
    with pytest.raises(ConfigError, match="--provider command needs --provider-command CMD"):
        create(ProviderOptions())


def test_metadata_shape_in_the_prompt_matches_what_the_parser_accepts(context):
    text = render_prompt(context, PromptMode.COMMAND).user
    shape = (
        text.split("candidate_metadata.json` with this shape")[1]
        .split("```json\n")[1]
        .split("```")[0]
    )
    example = json.loads(shape)
    example["hypothesis_kind"] = "launch_config"  # the template lists the choices here
    assert parse_metadata(json.dumps(example)).hypothesis


@pytest.mark.parametrize("kind", ["block_size", "num_warps", "num_stages", "autotune_pin"])
def test_an_agent_may_name_any_kind_the_tune_provider_records(tmp_path, context, kind):
    """One hypothesis_kind vocabulary (tlxstore.events.HypothesisKind) for every provider: an
    agent writing the tune provider's `block_size` is accepted, not refused."""
    body = FASTER_AGENT.replace(
        '"hypothesis_kind": "launch_config"', f'"hypothesis_kind": "{kind}"'
    )
    proposal = provider(agent(tmp_path, body), workspace=tmp_path / "run").propose(
        context, lambda e: None
    )
    assert isinstance(proposal, Proposal) and proposal.hypothesis_kind == kind
