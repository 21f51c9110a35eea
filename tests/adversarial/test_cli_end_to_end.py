"""The corpus through the real CLI: `tlxdb optimize --provider command` with an agent script that
writes one cheating candidate per proposal into candidate.py. Every cheat is refused with the right
reason, nothing is promoted, and the run exits 2 (no qualifying winner)."""

from __future__ import annotations

import json
import shlex
import shutil
import sys

import pytest
from click.testing import CliRunner
from test_corpus import CANDIDATES, CORPUS, HERE

from cli.main import main
from tlxstore.events import CandidateProposed, DecisionMade, IntegrityFlagged, Outcome
from tlxstore.runlog import RunLog

pytestmark = pytest.mark.slow  # a whole run: validation, baseline and 12 candidates (~30 s)

AGENT = """
import json, pathlib, sys
sys.stdin.read()
queue = pathlib.Path(sys.argv[1])
names = json.loads(queue.read_text())
name = names.pop(0)
queue.write_text(json.dumps(names))
src = pathlib.Path(sys.argv[2]) / (name + ".py")
pathlib.Path("candidate.py").write_text(src.read_text())
pathlib.Path("candidate_metadata.json").write_text(json.dumps({
    "hypothesis": name, "change": name, "hypothesis_kind": "other"}))
"""


def test_tlxdb_optimize_refuses_every_cheat_of_the_corpus(tmp_path):
    bundle = tmp_path / "bundle"
    shutil.copytree(HERE / "bundle", bundle)
    kernel = tmp_path / "src" / "kernel.py"
    kernel.parent.mkdir()
    kernel.write_text((HERE / "kernel.py").read_text())
    names = sorted(CORPUS)
    queue = tmp_path / "queue.json"
    queue.write_text(json.dumps(names))
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    cmd = " ".join(shlex.quote(str(p)) for p in (sys.executable, agent, queue, CANDIDATES))
    out = tmp_path / "out"
    argv = [
        "optimize",
        "--kernel", str(kernel),
        "--bundle", str(bundle),
        "--store", str(tmp_path / "store.duckdb"),
        "--output-dir", str(out),
        "--no-commit-winner",
        "--provider", "command",
        "--provider-command", cmd,
        "--max-rounds", "1",
        "--candidates-per-round", str(len(names)),
        "--benchmark-repetitions", "5",
        "--max-cv", "5.0",
        "--max-candidate-seconds", "120",
        "--result-format", "summary",
    ]  # fmt: skip
    result = CliRunner().invoke(main, argv, catch_exceptions=False)
    assert result.exit_code == 2, result.output

    events = [e.event for e in RunLog.open(out).envelopes()]
    hypothesis = {
        e.candidate_id: e.hypothesis
        for e in events
        if isinstance(e, CandidateProposed) and e.candidate_id != "baseline"
    }
    decisions = {
        hypothesis[e.candidate_id]: e
        for e in events
        if isinstance(e, DecisionMade) and e.candidate_id in hypothesis
    }
    assert sorted(decisions) == names, result.output[-2500:]
    for name, (outcome, reason) in CORPUS.items():
        assert decisions[name].outcome == outcome, (name, decisions[name].reason)
        assert decisions[name].reason.startswith(reason), (name, decisions[name].reason)
    assert not any(d.outcome == Outcome.PROMOTED for d in decisions.values())
    flagged = {hypothesis[e.candidate_id] for e in events if isinstance(e, IntegrityFlagged)}
    assert flagged == {n for n, (o, _) in CORPUS.items() if o == Outcome.REJECTED}
    assert kernel.read_text() == (HERE / "kernel.py").read_text()
    assert (
        not (out / "best_kernel.py").exists()
        or (out / "best_kernel.py").read_text() == kernel.read_text()
    )
