"""How a run stops early: its private copy of the bundle edited during the run, and Ctrl-C
(SIGINT)."""

import os
import re
import signal
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.drive_run import SCRIPT, start_held, wait_or_dump
from support.runner import request
from support.scripted_provider import ScriptedProvider, set_block

from optimizer.providers.base import ProviderContext, Recorder
from optimizer.reporting.result import EXIT_BAD_INPUT, EXIT_INTERRUPTED
from optimizer.run import lifecycle
from tlxstore.events import Outcome, RunFinished, StoppingReason
from tlxstore.fold import fold
from tlxstore.runlog import read_envelopes

pytestmark = pytest.mark.slow


@dataclass
class EditsTheCopy(ScriptedProvider):
    """Proposes like a scripted provider, but first edits the run's private copy of cases.json
    (read-only: as a process with more rights than the user's could)."""

    workspaces: Path | None = None

    def propose(self, ctx: ProviderContext, record: Recorder):
        [copy] = self.workspaces.glob("tlxdb-*/bundle/cases.json")
        copy.chmod(0o644)
        copy.write_text(copy.read_text().replace('"weight": 0.5', '"weight": 0.7'))
        return super().propose(ctx, record)


def test_a_changed_private_copy_stops_the_run_with_the_file_named(tmp_path, monkeypatch):
    req = request(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the run's workspace goes there
    provider = EditsTheCopy([set_block(256)], workspaces=tmp_path)
    result = lifecycle.optimize(req, provider=provider)
    assert result.exit_code == EXIT_BAD_INPUT
    assert result.stopping_reason == StoppingReason.BUNDLE_CHANGED
    assert re.fullmatch(
        r"the private copy of cases.json changed while c001 was being proposed "
        rf"\({tmp_path}/tlxdb-\w+/bundle/cases.json\); the run stops",
        result.detail,
    )
    state = fold(read_envelopes(req.output_dir))
    c001 = state.candidates["c001"]
    assert c001.build is None  # stopped before evaluating anything under the changed copy
    assert [(f.guard, f.blocking) for f in c001.flags] == [("files:changed", True)]
    assert c001.decision.outcome == Outcome.REJECTED
    assert (req.output_dir / "result.json").exists()


def test_sigint_records_an_interrupted_run_exits_130_and_it_can_be_resumed(tmp_path):
    proc = start_held(tmp_path, "BuildFinished:c001")
    os.kill(proc.pid, signal.SIGINT)
    wait_or_dump(proc, 120)
    log = tmp_path / "out" / "events.jsonl"
    assert proc.returncode == EXIT_INTERRUPTED
    state = fold(read_envelopes(log))
    assert (
        isinstance(state.finished, RunFinished)
        and state.finished.stopping_reason == StoppingReason.INTERRUPTED
    )
    assert (tmp_path / "out" / "result.json").exists()

    result = lifecycle.resume(
        str(tmp_path / "out"), tmp_path / "store.duckdb", provider=ScriptedProvider(list(SCRIPT))
    )
    assert result.stopping_reason == StoppingReason.MAX_ROUNDS
    done = fold(read_envelopes(log))
    assert done.finished.stopping_reason == StoppingReason.MAX_ROUNDS
    decided = [c for c in done.candidates.values() if c.decision and not c.failures]
    assert sorted(c.proposal.knobs["BLOCK_SIZE"] for c in decided) == [128, 256, 512]
