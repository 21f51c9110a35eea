"""The contract as users rely on it (docs/CONTRACT.md), through the real CLI against real DuckDB
files: an edit of the user's kernel or bundle during a run costs no measurement and is reported
(exit 3, the winner kept, nothing committed); validation fails a verify() that passes a
perturbed kernel it was seen to launch; flags typed win over a bundle's own budget.json, a
--budget file wins over them; the output folder holds what the contract lists."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from support.bundles import BLOCK_AGENT, kernel_copy, sleep_bundle
from support.repos import git, kernel_in_git
from support.scripted_provider import ScriptedProvider, set_block

from cli.main import main
from optimizer.providers import registry
from tlxstore.events import IntegrityFlagged, RunStarted
from tlxstore.store import Store

pytestmark = pytest.mark.slow  # each test is a run (or a validation) on the Triton interpreter

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _invoke(args: list) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _run_flags(tmp: Path, kernel: Path, bundle: Path) -> list:
    return [
        "optimize",
        "--kernel",
        kernel,
        "--bundle",
        bundle,
        "--store",
        tmp / "s.duckdb",
        "--output-dir",
        tmp / "out",
        "--benchmark-repetitions",
        "5",
        "--max-cv",
        "5",
        "--max-candidate-seconds",
        "60",
    ]


# ---- the user's edits during a run ---------------------------------------------------------


@pytest.mark.parametrize(
    ("edited", "label"),
    [("repo/vecadd_kernel.py", "the kernel vecadd_kernel.py"), ("bundle/harness.py", "harness.py")],
)
def test_an_edit_during_a_proposal_keeps_the_winner_uncommitted_and_exits_3(
    tmp_path, monkeypatch, edited, label
):
    kernel = kernel_in_git(tmp_path / "repo", monkeypatch)
    bundle = sleep_bundle(tmp_path / "bundle", sleep_s=0)  # samples fixed by BLOCK_SIZE
    victim = (tmp_path / edited).resolve()
    before = victim.read_text()
    agent = tmp_path / "agent.py"  # makes the faster candidate, and edits the victim meanwhile
    agent.write_text(
        BLOCK_AGENT
        + f"v = pathlib.Path({str(victim)!r})\nv.write_text(v.read_text() + '# mine\\n')\n"
    )
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(agent))}"

    r = _invoke(
        [
            *_run_flags(tmp_path, kernel, bundle),
            "--provider",
            "command",
            "--provider-command",
            command,
            "--max-rounds",
            "1",
            "--candidates-per-round",
            "1",
        ]
    )

    assert r.exit_code == 3, r.stderr
    out = json.loads(r.stdout)
    assert out["winner_id"] == "c001" and out["stopping_reason"] == "max_rounds"
    assert "BLOCK_SIZE = 1024" in (tmp_path / "out" / "best_kernel.py").read_text()
    assert victim.read_text() == before + "# mine\n"  # the user's edit, intact
    assert git(tmp_path / "repo", "rev-list", "--count", "HEAD").strip() == "1"  # no commit
    assert out["commit"]["success"] is False and out["commit"]["conflict"] is True
    changed = f"{label} ({victim}) changed while c001 was being proposed (seen at "
    assert len(out["changed_files"]) == 1 and out["changed_files"][0].startswith(changed)
    assert out["detail"].startswith(
        "winner c001 kept in the output folder (best_kernel.py), not committed: " + changed
    )
    envs = Store(tmp_path / "s.duckdb").run_envelopes(out["run_id"])
    [flag] = [e.event for e in envs if isinstance(e.event, IntegrityFlagged)]
    assert (flag.guard, flag.blocking, flag.candidate_id) == (
        "files:live-changed",
        False,
        "baseline",
    )
    assert flag.detail.startswith(changed)
    assert r.stderr.count("files:live-changed") == 1  # said once, when it was seen
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("run finished: max_rounds, winner c001 at ") and changed in last
    assert out["experiments"][0]["outcome"] == "promoted"  # the edit cost no measurement
    # committing was asked: the folder has the repository's snapshot, and no lease once over
    assert {"vcs_snapshot.json", ".lease"} & {p.name for p in (tmp_path / "out").iterdir()} == {
        "vcs_snapshot.json"
    }
    report = (tmp_path / "out" / "report.md").read_text()
    assert "## Integrity flags" in report
    assert f"| baseline | files:live-changed | False | {changed}" in report


# ---- validation proves what it can ---------------------------------------------------------


def _softmax_bundle(tmp: Path, verify: str) -> Path:
    """The softmax example's host bundle with its verify() replaced, on short rows (one that
    fits a block, one that loops) so that the interpreter is quick."""
    bundle = Path(shutil.copytree(EXAMPLES / "softmax" / "host", tmp / "bundle"))
    harness = bundle / "harness.py"
    harness.write_text(harness.read_text() + verify)
    cases = [
        {"case_id": f"2x{n}", "parameters": {"n_rows": 2, "n_cols": n, "dtype": "float32"}}
        for n in (100, 300)
    ]
    (bundle / "cases.json").write_text(json.dumps(cases))
    return bundle


PASSES_ANY_OUTPUT = """

def verify(artifact, case):
    artifact(_inputs(case))  # the kernel runs; its output is not looked at
    return {"passed": True}
"""
LAX_TOLERANCE = """

def verify(artifact, case):
    x = _inputs(case)
    y = artifact(x)  # NaN fails; a result off by 1.0 passes an atol of 2
    return {"passed": bool(torch.allclose(y, torch.softmax(x, dim=-1), atol=2.0))}
"""


def _softmax_kernel(tmp: Path) -> Path:
    (tmp / "src").mkdir()
    return Path(shutil.copyfile(EXAMPLES / "softmax" / "kernel.py", tmp / "src" / "kernel.py"))


def test_a_verify_that_passes_any_output_fails_the_wrong_answer_check_on_the_interpreter(
    tmp_path,
):
    bundle = _softmax_bundle(tmp_path, PASSES_ANY_OUTPUT)
    r = _invoke(
        ["validate", "--kernel", _softmax_kernel(tmp_path), "--bundle", bundle]
        + ["--benchmark-repetitions", "2", "--max-cv", "5"]
    )
    assert r.exit_code == 1
    rows = {ln.split()[1]: ln for ln in r.stdout.splitlines()[1:]}
    assert rows["negative:wrong_answer"].split()[0] == "FAIL", r.stdout
    assert (
        "verify() accepted a kernel whose stored values are off by 1.0, and the perturbed kernel "
        "(softmax_kernel) was observed to launch: it can pass a wrong kernel"
    ) in rows["negative:wrong_answer"]
    assert rows["negative:wrong_output"].split()[0] == "FAIL"


def test_optimize_refuses_a_bundle_whose_verify_passes_a_launched_wrong_answer(tmp_path):
    bundle = _softmax_bundle(tmp_path, LAX_TOLERANCE)
    flags = _run_flags(tmp_path, _softmax_kernel(tmp_path), bundle)
    r = _invoke(flags + ["--no-commit-winner", "--benchmark-repetitions", "2"])
    assert r.exit_code == 1
    assert r.stderr.strip().splitlines()[-1] == (
        "Error: bundle validation failed (negative:wrong_answer): verify() accepted a kernel "
        "whose stored values are off by 1.0, and the perturbed kernel (softmax_kernel) was "
        "observed to launch: it can pass a wrong kernel"
    )
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "s.duckdb").exists() or Store(tmp_path / "s.duckdb").run_ids() == []
    # without --output-dir: the run's folder would be the store's runs/<run id>; none is left,
    # nor the runs/ folder the run made for it (a new user found an empty one)
    at = flags.index("--output-dir")
    r = _invoke(
        [*flags[:at], *flags[at + 2 :], "--no-commit-winner", "--benchmark-repetitions", "2"]
    )
    assert r.exit_code == 1 and "negative:wrong_answer" in r.stderr
    assert not (tmp_path / "runs").exists()


# A user's build: the source written to one file name and imported by it. From the second build
# in a child on, Python hands back the first module: every candidate measured against itself.
FIXED_NAME_BUILD = """

import importlib as _importlib
import os
import sys as _sys
import tempfile as _tempfile

_FIXED_DIR = _tempfile.mkdtemp(prefix="fixed-name-")
_sys.path.insert(0, _FIXED_DIR)


def build(kernel_source, target):
    with open(os.path.join(_FIXED_DIR, "my_softmax.py"), "w") as f:
        f.write(kernel_source)
    module = _importlib.import_module("my_softmax")
    return {"success": True, "artifact": getattr(module, ENTRY), "diagnostics": ""}
"""


def test_validation_fails_a_build_that_imports_every_source_under_one_module_name(tmp_path):
    bundle = _softmax_bundle(tmp_path, FIXED_NAME_BUILD)
    r = _invoke(
        ["validate", "--kernel", _softmax_kernel(tmp_path), "--bundle", bundle]
        + ["--benchmark-repetitions", "2", "--max-cv", "5"]
    )
    assert r.exit_code == 1, r.stdout
    rows = {ln.split()[1]: ln for ln in r.stdout.splitlines()[1:]}
    assert rows["harness:fresh_build"].split()[0] == "FAIL", r.stdout
    assert r.stderr.strip().splitlines()[-1] == (
        "Error: validation failed (harness:fresh_build); the bundle cannot protect an optimization"
    )
    assert "does it import the kernel under a fixed module name?" in rows["harness:fresh_build"]
    # the same bundle with a build that imports each source as its own module passes it
    fresh = _softmax_bundle(tmp_path / "fresh", "")
    r = _invoke(
        ["validate", "--kernel", _softmax_kernel(tmp_path / "fresh"), "--bundle", fresh]
        + ["--benchmark-repetitions", "2", "--max-cv", "5"]
    )
    assert r.exit_code == 0, r.stdout
    assert "PASS" in {ln.split()[1]: ln for ln in r.stdout.splitlines()[1:]}["harness:fresh_build"]


# ---- flags and budget.json -----------------------------------------------------------------


@pytest.fixture
def two_steps():
    """A provider proposing two candidates (one a round), then nothing more."""
    registry.register(
        "two-steps", lambda options: ScriptedProvider([set_block(256), set_block(512)])
    )
    yield "two-steps"
    registry.unregister("two-steps")


# What docs/CONTRACT.md §3 lists for a run with a winner, kept with --no-commit-winner (it has no
# vcs_snapshot.json: that is for committing).
OUTPUT_FILES = {
    "events.jsonl",
    "run_request.json",
    "best_kernel.py",
    "result.json",
    "report.md",
    "report.html",
    "best_so_far.svg",
    "case_speedups.svg",
    "samples.svg",
    "experiments.json",
    "baseline_profile.json",
    "best_profile.json",
}
EXPERIMENT_FILES = {
    "kernel.py",
    "incremental.patch",
    "cumulative.patch",
    "profile",
    "result.json",
    "profile.json",
}


def _budget_run(tmp: Path, provider: str, given_with_budget: bool) -> Result:
    """`--bundle B --max-rounds 1`, B/budget.json allowing 8 rounds of one candidate, and
    `--budget B/budget.json` when `given_with_budget`."""
    bundle = sleep_bundle(tmp / "bundle", sleep_s=0)
    (bundle / "budget.json").write_text(json.dumps({"max_rounds": 8, "candidates_per_round": 1}))
    flags = ["--no-commit-winner", "--provider", provider, "--max-rounds", "1"]
    if given_with_budget:
        flags += ["--budget", bundle / "budget.json"]
    return _invoke(_run_flags(tmp, kernel_copy(tmp / "src"), bundle) + flags)


def test_a_flag_typed_wins_over_the_bundles_own_budget_json(tmp_path, two_steps):
    r = _budget_run(tmp_path, two_steps, given_with_budget=False)
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout)
    assert [x["round"] for x in out["experiments"]] == [1]
    assert out["stopping_reason"] == "max_rounds"
    assert (
        "note: --max-rounds 1 overrides the bundle's budget.json (max_rounds 8); give the file "
        "with --budget for it to win"
    ) in r.stderr.splitlines()
    started = Store(tmp_path / "s.duckdb").run_envelopes(out["run_id"])[0].event
    assert isinstance(started, RunStarted) and started.thresholds.max_rounds == 1
    # the output folder holds what the contract lists, and no lease once the run is over
    folder = tmp_path / "out"
    assert {p.name for p in folder.iterdir()} == OUTPUT_FILES | {"experiments"}
    for cid in ("baseline", "c001"):
        assert EXPERIMENT_FILES - {"incremental.patch", "cumulative.patch"} <= {
            p.name for p in (folder / "experiments" / cid).iterdir()
        }
    assert {p.name for p in (folder / "experiments" / "c001").iterdir()} == EXPERIMENT_FILES


def test_a_budget_file_given_with_budget_wins_over_the_flags(tmp_path, two_steps):
    r = _budget_run(tmp_path, two_steps, given_with_budget=True)
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout)
    assert [x["round"] for x in out["experiments"]] == [1, 2]  # beyond --max-rounds 1
    assert out["stopping_reason"] == "search_exhausted"  # the script ended, not the budget
    assert "note: --max-rounds 1 is overridden by budget.json (max_rounds 8)" in r.stderr
    started = Store(tmp_path / "s.duckdb").run_envelopes(out["run_id"])[0].event
    assert isinstance(started, RunStarted) and started.thresholds.max_rounds == 8


def test_help_says_which_budget_wins():
    text = " ".join(_invoke(["optimize", "--help"]).stdout.split())
    assert (
        "A budget.json whose values override the budget flags (as in the TLX agent); a "
        "budget.json found in --bundle DIR yields to the flags you type." in text
    )
