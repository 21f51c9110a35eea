"""Four processes acting as hosts, each a real `tlxdb optimize` (the vecadd bundle on the Triton
interpreter, one candidate from a command agent), write one team store (PostgreSQL catalog started
on 127.0.0.1, Parquet in a folder) while a fifth process reads it. Every event of every run log
is in the store exactly once, each run's seqs are gapless, the reader never sees a count go back
or an event twice, and the later hosts' dedup finds the first host's candidate."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.bundles import BLOCK_AGENT as AGENT

from tlxstore.events import DecisionMade, DuplicateDetected
from tlxstore.runlog import read_envelopes
from tlxstore.team import TeamStore

pytest.importorskip("psycopg")

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
READER = """
import json, sys, time
from tlxstore.team import TeamStore
store, seen = TeamStore(sys.argv[1]), []
while not __import__("os").path.exists(sys.argv[2]):
    row = store.query("SELECT count(*) AS n, count(DISTINCT event_id) AS ids FROM events").to_pylist()[0]
    seen.append([row["n"], row["ids"]])
    time.sleep(0.2)
print(json.dumps(seen))
"""


def _host(tmp: Path, name: str, url: str, agent: Path) -> tuple[subprocess.Popen, Path]:
    bundle = tmp / f"{name}-bundle"
    shutil.copytree(FIXTURES / "vecadd_bundle", bundle)
    kernel = tmp / f"{name}-src" / "vecadd_kernel.py"
    kernel.parent.mkdir()
    kernel.write_text((FIXTURES / "vecadd_kernel.py").read_text())
    out = tmp / f"{name}-out"
    argv = [
        str(Path(sys.executable).with_name("tlxdb")),
        "optimize",
        *("--kernel", str(kernel), "--bundle", str(bundle), "--store", url),
        *("--output-dir", str(out), "--no-commit-winner", "--result-format", "none"),
        *("--provider", "command", "--provider-command", f"{sys.executable} {agent}"),
        *("--max-rounds", "1", "--candidates-per-round", "1", "--benchmark-repetitions", "5"),
        *("--max-cv", "5", "--max-candidate-seconds", "120", "--label", name),
    ]
    env = os.environ | {"TRITON_INTERPRET": "1"}
    return subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, text=True), out


def _wait(proc: subprocess.Popen) -> None:
    _, err = proc.communicate(timeout=300)
    assert proc.returncode in (0, 2), err[-3000:]


def test_four_hosts_and_a_reader_share_one_team_store(postgres, tmp_path):
    url = postgres.store_url(tmp_path / "lake")
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    TeamStore(url).close()  # created once, as a team would before its hosts start
    stop = tmp_path / "stop"
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, url, str(stop)], stdout=subprocess.PIPE, text=True
    )
    first, first_out = _host(tmp_path, "host0", url, agent)
    # The other hosts start once the first host's candidate is decided in the team store, so
    # that their dedup has something to find; they then run alongside it and each other.
    watcher = TeamStore(url)
    deadline = time.monotonic() + 240
    while (
        not watcher.query(
            "SELECT count(*) AS n FROM proj_decisions WHERE candidate_id <> 'baseline'"
        )
        .column("n")[0]
        .as_py()
    ):
        assert first.poll() is None, first.stderr.read() if first.stderr else ""
        assert time.monotonic() < deadline
        time.sleep(0.5)
    others = [_host(tmp_path, f"host{i}", url, agent) for i in (1, 2, 3)]
    for proc, _ in [(first, first_out), *others]:
        _wait(proc)
    stop.touch()
    seen = json.loads(reader.communicate(timeout=120)[0])

    logs = {
        out: read_envelopes(out / "events.jsonl") for out in [first_out, *(o for _, o in others)]
    }
    store = TeamStore(url)
    assert sorted(store.run_ids()) == sorted(envs[0].run_id for envs in logs.values())
    total = sum(len(envs) for envs in logs.values())
    row = store.query(
        "SELECT count(*) AS n, count(DISTINCT event_id) AS ids, "
        "count(DISTINCT (run_id, seq)) AS slots FROM events"
    ).to_pylist()[0]
    assert row == {"n": total, "ids": total, "slots": total}
    for envs in logs.values():  # each log is in the store as it was written: same ids, same seqs
        assert store.run_envelopes(envs[0].run_id) == envs
        assert [e.seq for e in envs] == list(range(len(envs)))
    assert len(seen) > 1 and all(n == ids for n, ids in seen)
    assert [n for n, _ in seen] == sorted(n for n, _ in seen) and seen[-1][0] == total

    first_run = logs[first_out][0].run_id
    measured = [
        e.event.candidate_id
        for e in logs[first_out]
        if isinstance(e.event, DecisionMade) and e.event.candidate_id != "baseline"
    ]
    for _, out in others:
        dups = [e.event for e in logs[out] if isinstance(e.event, DuplicateDetected)]
        assert [(d.duplicate_of_run, d.duplicate_of_candidate) for d in dups] == [
            (first_run, measured[0])
        ]
