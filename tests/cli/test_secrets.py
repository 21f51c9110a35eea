"""Secrets stay out of what tlxdb records or prints (tlxstore/redaction.py), through the real CLI:
a candidate that raises with a secret of the bundle's environment in its message, an API key in
tlxdb's environment, and credentials in --api-base."""

from __future__ import annotations

import base64
import json
import sys
from contextlib import contextmanager

import duckdb
import pytest
from click.testing import CliRunner
from support.bundles import KERNEL, kernel_copy, vecadd_bundle
from support.scripted_provider import ScriptedProvider, constant

from cli.main import main
from optimizer.providers import registry

HARNESS_TOKEN = "tok-harness-0123456789"  # the bundle gives it to its harness child
API_KEY = "sk-test-secret-0123456789"  # tlxdb's own; never given to the harness child
URL_PASSWORD = "pw-s3cret-xyz"
LEAKY = KERNEL.read_text() + (
    "\nimport os\n"
    "raise RuntimeError('leak ' + os.environ['HARNESS_TOKEN'] + ' key '"
    " + os.environ.get('OPENAI_API_KEY', 'absent'))\n"
)


@contextmanager
def _proposing(name: str, source: str):
    """A provider `name` (registered for the block) whose one candidate is `source`."""
    registry.register(name, lambda options: ScriptedProvider([constant(source, {"BLOCK_SIZE": 1})]))
    try:
        yield
    finally:
        registry.unregister(name)


@pytest.fixture
def leaky_provider():
    with _proposing("leaky", LEAKY):
        yield


@pytest.mark.slow
def test_no_secret_reaches_events_store_files_or_output(tmp_path, monkeypatch, leaky_provider):
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    bundle = vecadd_bundle(tmp_path / "bundle")
    target = json.loads((bundle / "target.json").read_text())
    target["environment"]["HARNESS_TOKEN"] = HARNESS_TOKEN
    (bundle / "target.json").write_text(json.dumps(target))
    api_base = f"http://tlxuser:{URL_PASSWORD}@127.0.0.1:9/v1"
    monkeypatch.setattr(sys, "argv", ["tlxdb", "optimize", "--api-base", api_base])
    out, store = tmp_path / "out", tmp_path / "s.duckdb"
    args = ["optimize", "--kernel", str(kernel_copy(tmp_path / "src")), "--bundle", str(bundle)]
    args += ["--store", str(store), "--output-dir", str(out), "--provider", "leaky"]
    args += ["--api-base", api_base, "--max-rounds", "1", "--candidates-per-round", "1"]
    args += ["--benchmark-repetitions", "8", "--max-cv", "5", "--no-commit-winner"]
    r = CliRunner().invoke(main, args, catch_exceptions=False)
    assert r.exit_code == 2, r.stderr

    con = duckdb.connect(str(store), read_only=True)
    stored = "\n".join(p for (p,) in con.execute("SELECT payload FROM events").fetchall())
    con.close()
    texts = {"stdout": r.stdout, "stderr": r.stderr, "store": stored}
    texts |= {str(p.relative_to(out)): p.read_text() for p in out.rglob("*") if p.is_file()}
    assert {"events.jsonl", "run_request.json", "result.json", "report.md"} <= set(texts)
    for name, text in texts.items():
        for secret in (HARNESS_TOKEN, API_KEY, URL_PASSWORD):
            assert secret not in text, (name, secret)
    log = texts["events.jsonl"]
    assert "leak [redacted] key absent" in log  # the child never had tlxdb's API key
    assert "http://[redacted]@127.0.0.1:9/v1" in texts["run_request.json"]
    assert "http://[redacted]@127.0.0.1:9/v1" in log  # RunStarted's argv
    assert "leak [redacted]" in stored


def test_the_harness_child_finds_tlxdb_at_the_repository_root(tmp_path):
    """The child's PYTHONPATH starts at the folder holding the `optimizer` package (the child
    module is optimizer/evaluation/child.py), so it runs without tlxdb installed."""
    check = (
        "\nimport os as _os, pathlib as _pl\n"
        "_first = _pl.Path(_os.environ['PYTHONPATH'].split(_os.pathsep)[0])\n"
        "if not (_first / 'optimizer' / 'evaluation' / 'child.py').is_file():\n"
        "    raise RuntimeError(f'PYTHONPATH starts at {_first}')\n"
    )
    bundle = vecadd_bundle(tmp_path / "bundle", harness_append=check)
    args = ["validate", "--kernel", str(kernel_copy(tmp_path / "src")), "--bundle", str(bundle)]
    args += ["--max-cv", "5", "--benchmark-repetitions", "8"]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output


BACKSLASHED = "tok\\h4rness\\0123456789"  # a secret of the bundle's environment, with backslashes
COMMAND_KEY = "sk-cmdline-0123456789abcdef"  # in --provider-command's own command line
ESCAPING = KERNEL.read_text() + (
    "\nimport base64, os\n"
    "_s = os.environ['HARNESS_TOKEN']\n"
    "raise RuntimeError(repr(_s) + ' ' + base64.b64encode(('user:' + _s).encode()).decode())\n"
)


@pytest.fixture
def escaping_provider():
    with _proposing("escaping", ESCAPING):
        yield


@pytest.mark.slow
def test_escaped_encoded_and_command_line_secrets_are_masked(
    tmp_path, monkeypatch, escaping_provider
):
    """A target.json secret with a backslash leaked through repr(), its base64 was not masked,
    and a key inside --provider-command was stored (store, run_request.json, report)."""
    bundle = vecadd_bundle(tmp_path / "bundle")
    target = json.loads((bundle / "target.json").read_text())
    target["environment"]["HARNESS_TOKEN"] = BACKSLASHED
    (bundle / "target.json").write_text(json.dumps(target))
    command = f"agent.sh --api-key {COMMAND_KEY} --fast"
    out, store = tmp_path / "out", tmp_path / "s.duckdb"
    args = ["optimize", "--kernel", str(kernel_copy(tmp_path / "src")), "--bundle", str(bundle)]
    args += ["--store", str(store), "--output-dir", str(out), "--provider", "escaping"]
    args += ["--provider-command", command, "--max-rounds", "1", "--candidates-per-round", "1"]
    args += ["--benchmark-repetitions", "8", "--max-cv", "5", "--no-commit-winner"]
    monkeypatch.setattr(sys, "argv", ["tlxdb", *args])
    r = CliRunner().invoke(main, args, catch_exceptions=False)
    assert r.exit_code == 2, r.stderr
    rep = CliRunner().invoke(
        main, ["report", str(out), "--store", str(store), "--to", str(tmp_path / "rep")]
    )
    assert rep.exit_code == 0, rep.output
    con = duckdb.connect(str(store), read_only=True)
    stored = "\n".join(p for (p,) in con.execute("SELECT payload FROM events").fetchall())
    con.close()
    texts = {"stdout": r.stdout, "stderr": r.stderr, "store": stored}
    for folder in (out, tmp_path / "rep"):
        texts |= {
            str(p): p.read_text()
            for p in folder.rglob("*")
            if p.suffix in (".json", ".jsonl", ".md", ".html")
        }
    encoded = base64.b64encode(f"user:{BACKSLASHED}".encode()).decode()
    for name, text in texts.items():
        for leak in (BACKSLASHED, repr(BACKSLASHED)[1:-1], COMMAND_KEY, encoded[8:-4]):
            assert leak not in text, (name, leak)
    assert "agent.sh --api-key [redacted] --fast" in (out / "run_request.json").read_text()
    assert "RuntimeError: '[redacted]'" in stored
