"""`tlxdb optimize` end to end in a real git checkout with work in progress: the winner's change
is committed and nothing else moves; a rejecting hook is exit 3 with the winner kept."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.bundles import KERNEL, vecadd_bundle

from cli.main import main
from optimizer.reporting.result import EXIT_NOT_COMMITTED, EXIT_SUCCESS
from optimizer.vcs.message import TRAILER
from tlxstore.events import CommitAttempted
from tlxstore.fold import fold
from tlxstore.runlog import RunLog

pytestmark = pytest.mark.slow

# The agent: widen the blocks (far fewer interpreter programs: a large, reliable speedup).
AGENT = (
    "sed -i 's/^BLOCK_SIZE = 64$/BLOCK_SIZE = 1024/' candidate.py && "
    + "printf '%s' "
    + shlex.quote(
        json.dumps(
            {
                "hypothesis": "the interpreter pays per program: 16x fewer programs",
                "change": "BLOCK_SIZE 64 -> 1024",
                "commit_title": "Widen vecadd blocks to 1024",
                "commit_summary": "BLOCK_SIZE 64 -> 1024: one program per 1024 elements.",
            }
        )
    )
    + " > candidate_metadata.json"
)
USER_EDIT = ('"""Element-wise vector add', '"""Element-wise vector add (work in progress)')


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, check=True
    ).stdout


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git checkout: the kernel committed, then edited (uncommitted), and a staged file."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = K E\n\temail = ke@example.com\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    root = tmp_path / "checkout"
    (root / "kernels").mkdir(parents=True)
    _git(root, "init", "-q", "-b", "main")
    (root / "kernels/vecadd_kernel.py").write_text(KERNEL.read_text())
    (root / "notes.md").write_text("notes\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "vecadd")
    kernel = root / "kernels/vecadd_kernel.py"
    kernel.write_text(kernel.read_text().replace(*USER_EDIT))
    (root / "notes.md").write_text("staged notes\n")
    _git(root, "add", "notes.md")
    return root


def _optimize(tmp_path: Path, kernel: Path) -> tuple[int, dict, Path]:
    out = tmp_path / "out"
    args = [
        "optimize", "--kernel", str(kernel), "--bundle", str(vecadd_bundle(tmp_path / "bundle")),
        "--store", str(tmp_path / "store.duckdb"), "--output-dir", str(out),
        "--provider", "command", "--provider-command", AGENT,
        "--max-rounds", "1", "--candidates-per-round", "1",
        "--benchmark-repetitions", "8", "--max-cv", "5.0", "--max-candidate-seconds", "120",
    ]  # fmt: skip
    res = CliRunner().invoke(main, args)
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output
    return res.exit_code, json.loads(res.stdout), out


def test_optimize_commits_only_the_winners_change_in_a_dirty_checkout(
    tmp_path: Path, checkout: Path
) -> None:
    kernel = checkout / "kernels/vecadd_kernel.py"
    user_text = kernel.read_text()
    head_before = _git(checkout, "rev-parse", "HEAD").strip()
    code, result, out = _optimize(tmp_path, kernel)
    assert code == EXIT_SUCCESS, result
    assert result["commit"]["success"] is True
    # The commit: the committed kernel plus BLOCK_SIZE only; the user's docstring edit is not in it.
    committed = _git(checkout, "show", "HEAD:kernels/vecadd_kernel.py")
    assert committed == KERNEL.read_text().replace("BLOCK_SIZE = 64", "BLOCK_SIZE = 1024")
    assert _git(checkout, "rev-parse", "HEAD~1").strip() == head_before
    assert _git(checkout, "diff-tree", "--no-commit-id", "--name-only", "-r", "HEAD").split() == [
        "kernels/vecadd_kernel.py"
    ]
    message = _git(checkout, "log", "-1", "--format=%B").rstrip("\n").splitlines()
    assert message[0] == "Widen vecadd blocks to 1024"
    assert message[-1] == TRAILER and message.count(TRAILER) == 1
    assert any(line.startswith("n2048") for line in message)
    # The working file keeps the user's edit, still uncommitted, with the winner's change.
    assert kernel.read_text() == user_text.replace("BLOCK_SIZE = 64", "BLOCK_SIZE = 1024")
    assert _git(checkout, "diff", "--name-only").split() == ["kernels/vecadd_kernel.py"]
    # The staged file is still staged, unchanged.
    assert _git(checkout, "diff", "--cached", "--name-only").split() == ["notes.md"]
    assert _git(checkout, "show", ":notes.md") == "staged notes\n"
    # The merged text (never measured) was re-verified; the attempt is an event.
    commits = fold(RunLog.open(out).envelopes()).commits
    assert len(commits) == 1 and isinstance(commits[0], CommitAttempted)
    assert commits[0].reverified is True and commits[0].vcs == "git"
    assert commits[0].rev_after == _git(checkout, "rev-parse", "HEAD").strip()


def test_optimize_exits_3_when_a_hook_rejects_and_keeps_the_winner(
    tmp_path: Path, checkout: Path
) -> None:
    hook = checkout / ".git/hooks/pre-commit"
    hook.write_text("#!/bin/sh\necho 'kernel changes need review' >&2\nexit 1\n")
    hook.chmod(0o755)
    kernel = checkout / "kernels/vecadd_kernel.py"
    user_text = kernel.read_text()
    index_before = (checkout / ".git/index").read_bytes()
    head_before = _git(checkout, "rev-parse", "HEAD").strip()
    code, result, out = _optimize(tmp_path, kernel)
    assert code == EXIT_NOT_COMMITTED, result
    assert result["commit"]["success"] is False
    assert "kernel changes need review" in result["commit"]["diagnostics"]
    assert _git(checkout, "rev-parse", "HEAD").strip() == head_before
    assert kernel.read_text() == user_text
    assert (checkout / ".git/index").read_bytes() == index_before
    assert "BLOCK_SIZE = 1024" in (out / "best_kernel.py").read_text()
