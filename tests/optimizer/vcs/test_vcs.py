"""Committing the winner, against real temporary git and Mercurial repositories."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from optimizer.vcs.commit import AmbiguousVcsError, CommitRequest, VcsKind, commit_winner, probe
from optimizer.vcs.common import hg_executable
from optimizer.vcs.message import TRAILER
from tlxstore.events import CaseSpeedup, CommitAttempted
from tlxstore.hashing import digest_text

HG = hg_executable()
needs_hg = pytest.mark.skipif(
    HG is None, reason="Mercurial is not installed (pip install mercurial)"
)

KERNEL = '''"""Row-wise softmax."""
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(out_ptr, in_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(in_ptr + row * n_cols + offs, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    den = tl.sum(num, axis=0)
    tl.store(out_ptr + row * n_cols + offs, num / den, mask=mask)


def launch(out, x):
    n_rows, n_cols = x.shape
    softmax_kernel[(n_rows,)](out, x, n_cols, BLOCK=triton.next_power_of_2(n_cols), num_warps=4)
'''
# The agent's change: one launch knob, at the bottom of the file.
WINNER = KERNEL.replace("num_warps=4", "num_warps=16")
# The user's own edit, far from the agent's change (the docstring at the top).
USER_EDIT = ('"""Row-wise softmax."""', '"""Row-wise softmax, numerically stable."""')
# The user's edit of the very line the agent changed.
OVERLAP_EDIT = ("num_warps=4)", "num_warps=8)")

CASES = [
    CaseSpeedup(
        case_id="rows4096",
        weight=1.0,
        baseline_median_us=120.5,
        candidate_median_us=80.25,
        speedup=120.5 / 80.25,
        candidate_cv=0.012,
        baseline_cv=0.02,
    )
]


# --------------------------------------------------------------------------------------------
# Real repositories


def _sh(argv: list[str], cwd: Path, check: bool = True) -> str:
    res = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    if check and res.returncode != 0:
        raise AssertionError(f"{argv} failed: {res.stderr}")
    return res.stdout


class Repo:
    """A real repository of one kind, with what the tests need to read its state."""

    kind: VcsKind

    def __init__(self, root: Path) -> None:
        self.root = root

    def write(self, rel: str, text: str) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode())
        return path

    def read(self, rel: str) -> str:
        return (self.root / rel).read_bytes().decode()

    def files(self) -> dict[str, bytes]:
        """Every file of the work tree, outside the repository's own folder."""
        out = {}
        for p in sorted(self.root.rglob("*")):
            rel = p.relative_to(self.root)
            if p.is_file() and rel.parts[0] not in (".git", ".hg"):
                out[rel.as_posix()] = p.read_bytes()
        return out


class GitRepo(Repo):
    kind = VcsKind.GIT

    @classmethod
    def init(cls, root: Path) -> GitRepo:
        root.mkdir(parents=True, exist_ok=True)
        _sh(["git", "init", "-q", "-b", "main"], root)
        return cls(root)

    def git(self, *args: str, check: bool = True) -> str:
        return _sh(["git", *args], self.root, check)

    def commit_all(self, message: str = "work") -> None:
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)

    def head(self) -> str:
        return self.git("rev-parse", "HEAD").strip()

    def at_head(self, rel: str) -> str:
        return self.git("show", f"HEAD:{rel}")

    def last_message(self) -> str:
        return self.git("log", "-1", "--format=%B")

    def parent_of_head(self) -> str:
        return self.git("rev-parse", "HEAD~1").strip()

    def status(self) -> str:
        return _sh(["git", "--no-optional-locks", "status", "--porcelain"], self.root)

    def state(self) -> tuple:
        """Everything a failed commit must leave as it was, the index file's bytes included."""
        return (self.head(), self.status(), self.files(), (self.root / ".git/index").read_bytes())

    def reject_commits(self) -> None:
        hook = self.root / ".git/hooks/pre-commit"
        hook.write_text("#!/bin/sh\necho 'pre-commit: kernels need a review ticket' >&2\nexit 1\n")
        hook.chmod(0o755)


class HgRepo(Repo):
    kind = VcsKind.HG

    @classmethod
    def init(cls, root: Path) -> HgRepo:
        root.mkdir(parents=True, exist_ok=True)
        _sh([HG, "init"], root)
        return cls(root)

    def hg(self, *args: str, check: bool = True) -> str:
        return _sh([HG, *args], self.root, check)

    def commit_all(self, message: str = "work") -> None:
        self.hg("commit", "-A", "-q", "-m", message)

    def head(self) -> str:
        return self.hg("log", "-r", ".", "-T", "{node}")

    def at_head(self, rel: str) -> str:
        return self.hg("cat", "-r", ".", rel)

    def last_message(self) -> str:
        return self.hg("log", "-r", ".", "-T", "{desc}") + "\n"

    def parent_of_head(self) -> str:
        return self.hg("log", "-r", "p1(.)", "-T", "{node}")

    def status(self) -> str:
        return self.hg("status")

    def state(self) -> tuple:
        return (self.head(), self.status(), self.files())

    def reject_commits(self) -> None:
        with open(self.root / ".hg/hgrc", "a") as f:
            f.write(
                "[hooks]\npretxncommit.review = sh -c 'echo kernels need a review ticket >&2; exit 1'\n"
            )


@pytest.fixture(autouse=True)
def _vcs_identity(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private HOME with a git and hg identity; nothing of the machine's config leaks in."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Kernel Engineer\n\temail = ke@example.com\n[init]\n\tdefaultBranch = main\n"
    )
    (home / ".hgrc").write_text("[ui]\nusername = Kernel Engineer <ke@example.com>\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    monkeypatch.setenv("HGRCPATH", str(home / ".hgrc"))
    for var in (
        "EMAIL",
        "HGUSER",
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL",
        "GIT_DIR",
        "GIT_INDEX_FILE",
        "GIT_WORK_TREE",
    ):
        monkeypatch.delenv(var, raising=False)
    return home


def _make_repo(kind: str, root: Path) -> Repo:
    if kind == "hg":
        if HG is None:
            pytest.skip("Mercurial is not installed")
        return HgRepo.init(root)
    return GitRepo.init(root)


@pytest.fixture(params=["git", "hg"])
def repo(request: pytest.FixtureRequest, tmp_path: Path) -> Repo:
    """A repository with the kernel committed in a sub-folder, and an unrelated file."""
    r = _make_repo(request.param, tmp_path / "checkout")
    r.write("kernels/softmax.py", KERNEL)
    r.write("README.md", "notes\n")
    r.commit_all("add softmax")
    return r


class Reverify:
    """The re-verification hook: records what it was asked and answers as told."""

    def __init__(self, answer: bool = True) -> None:
        self.answer = answer
        self.sources: list[str] = []

    def __call__(self, source: str) -> bool:
        self.sources.append(source)
        return self.answer


def _request(
    kernel: Path, base: str, winner: str = "", reverify: Reverify | None = None, **kw
) -> CommitRequest:
    return CommitRequest(
        candidate_id="c003",
        kernel_path=kernel,
        base_source=base,
        winner_source=winner or base.replace("num_warps=4", "num_warps=16"),
        subject=kw.pop("subject", "Use 16 warps for softmax rows"),
        summary=kw.pop("summary", "num_warps 4 -> 16: one row per program needs more lanes."),
        cases=CASES,
        speedup=1.5,
        ci_low=1.42,
        ci_high=1.58,
        reverify=reverify or Reverify(),
        **kw,
    )


# --------------------------------------------------------------------------------------------
# Both systems


def test_clean_tree_commits_the_winner_on_top_of_head(repo: Repo) -> None:
    kernel = repo.root / "kernels/softmax.py"
    snap = probe(kernel)
    before = repo.head()
    reverify = Reverify()
    result = commit_winner(_request(kernel, KERNEL, reverify=reverify), snap)
    assert isinstance(result, CommitAttempted)
    assert result.success and not result.conflict, result.diagnostics
    assert result.vcs == repo.kind.value
    assert result.rev_before == before and result.rev_after == repo.head() != before
    assert repo.parent_of_head() == before
    assert repo.at_head("kernels/softmax.py") == WINNER
    assert repo.read("kernels/softmax.py") == WINNER
    assert repo.status() == ""
    assert reverify.sources == []  # the merged source is the winner itself
    assert result.reverified is None
    assert result.committed_source_hash == digest_text(WINNER)
    message = repo.last_message()
    assert message.splitlines()[0] == "Use 16 warps for softmax rows"
    assert message.rstrip("\n").splitlines()[-1] == TRAILER
    assert message.count(TRAILER) == 1
    assert "rows4096" in message and "120.500" in message and "80.250" in message


def test_dirty_kernel_keeps_the_users_edits_uncommitted_and_commits_only_the_delta(
    repo: Repo,
) -> None:
    kernel = repo.root / "kernels/softmax.py"
    user = KERNEL.replace(*USER_EDIT)
    kernel.write_text(user)
    snap = probe(kernel)
    reverify = Reverify()
    result = commit_winner(_request(kernel, user, reverify=reverify), snap)
    assert result.success, result.diagnostics
    # The commit holds the committed kernel plus the agent's change, not the user's edit.
    assert repo.at_head("kernels/softmax.py") == WINNER
    # The working file holds both: the user's edit is still there, and still uncommitted.
    assert repo.read("kernels/softmax.py") == user.replace("num_warps=4", "num_warps=16")
    assert "softmax.py" in repo.status()
    # The merged source (never measured) was re-verified before it was committed.
    assert reverify.sources == [WINNER]
    assert result.reverified is True
    assert result.committed_source_hash == digest_text(WINNER)


def test_overlapping_edits_are_a_conflict_and_change_nothing(repo: Repo) -> None:
    kernel = repo.root / "kernels/softmax.py"
    user = KERNEL.replace(*OVERLAP_EDIT)
    kernel.write_text(user)
    snap = probe(kernel)
    state = repo.state()
    reverify = Reverify()
    winner = user.replace("num_warps=8", "num_warps=16")
    result = commit_winner(_request(kernel, user, winner, reverify=reverify), snap)
    assert not result.success and result.conflict
    assert "overlaps your uncommitted edits" in result.diagnostics
    assert repo.state() == state
    assert reverify.sources == []


def test_kernel_edited_during_the_run_is_not_committed(repo: Repo) -> None:
    kernel = repo.root / "kernels/softmax.py"
    snap = probe(kernel)
    kernel.write_text(KERNEL + "\n# the user kept working\n")
    state = repo.state()
    result = commit_winner(_request(kernel, KERNEL), snap)
    assert not result.success and result.conflict
    assert (
        result.diagnostics
        == "kernels/softmax.py was edited during the run; the winner was not committed"
    )
    assert repo.state() == state


def test_head_moved_during_the_run_is_not_committed(repo: Repo) -> None:
    kernel = repo.root / "kernels/softmax.py"
    snap = probe(kernel)
    repo.write("README.md", "more notes\n")
    repo.commit_all("unrelated commit while the run was going")
    state = repo.state()
    result = commit_winner(_request(kernel, KERNEL), snap)
    assert not result.success and result.conflict
    assert "moved" in result.diagnostics and "during the run" in result.diagnostics
    assert repo.state() == state


def test_rejecting_hook_leaves_everything_as_it_was(repo: Repo) -> None:
    kernel = repo.root / "kernels/softmax.py"
    user = KERNEL.replace(*USER_EDIT)
    kernel.write_text(user)
    repo.write("scratch.py", "print('wip')\n")
    repo.reject_commits()
    snap = probe(kernel)
    state = repo.state()
    result = commit_winner(_request(kernel, user), snap)
    assert not result.success and not result.conflict
    assert "kernels need a review ticket" in result.diagnostics
    assert "\n" not in result.diagnostics
    assert result.rev_after is None
    assert repo.state() == state


def test_no_identity_configured_fails_cleanly(repo: Repo, _vcs_identity: Path) -> None:
    (_vcs_identity / ".gitconfig").write_text("[user]\n\tuseConfigOnly = true\n")
    (_vcs_identity / ".hgrc").write_text("")
    kernel = repo.root / "kernels/softmax.py"
    snap = probe(kernel)
    state = repo.state()
    result = commit_winner(_request(kernel, KERNEL), snap)
    assert not result.success and not result.conflict
    expected = (
        "no email was given" if repo.kind is VcsKind.GIT else "no Mercurial username is configured"
    )
    assert expected in result.diagnostics
    assert repo.state() == state


def test_merged_source_that_fails_reverification_is_not_committed(repo: Repo) -> None:
    kernel = repo.root / "kernels/softmax.py"
    user = KERNEL.replace(*USER_EDIT)
    kernel.write_text(user)
    snap = probe(kernel)
    state = repo.state()
    result = commit_winner(_request(kernel, user, reverify=Reverify(answer=False)), snap)
    assert not result.success and result.reverified is False
    assert result.committed_source_hash is None and result.rev_after is None
    assert "failed verification" in result.diagnostics
    assert repo.state() == state


def test_untracked_kernel_is_not_committed(repo: Repo) -> None:
    kernel = repo.write("kernels/new_kernel.py", KERNEL)
    snap = probe(kernel)
    assert snap.vcs is repo.kind and snap.committed_source is None
    state = repo.state()
    result = commit_winner(_request(kernel, KERNEL), snap)
    assert not result.success
    assert "has no committed version" in result.diagnostics
    assert repo.state() == state


def test_other_dirty_files_stay_exactly_as_they_were(repo: Repo) -> None:
    kernel = repo.root / "kernels/softmax.py"
    repo.write("README.md", "notes, edited and not committed\n")
    repo.write("untracked.txt", "scratch\n")
    if isinstance(repo, HgRepo):
        repo.write("added.py", "x = 1\n")
        repo.hg("add", "added.py")
    snap = probe(kernel)
    status_before = repo.status()
    files_before = repo.files()
    result = commit_winner(_request(kernel, KERNEL), snap)
    assert result.success, result.diagnostics
    files_after = repo.files()
    assert files_after.pop("kernels/softmax.py") == WINNER.encode()
    files_before.pop("kernels/softmax.py")
    assert files_after == files_before
    assert repo.status() == status_before
    # Only the kernel changed in the commit.
    if isinstance(repo, GitRepo):
        changed = repo.git("diff-tree", "--no-commit-id", "--name-only", "-r", "HEAD").split()
    else:
        changed = repo.hg("log", "-r", ".", "-T", "{files}").split()
    assert changed == ["kernels/softmax.py"]


# --------------------------------------------------------------------------------------------
# git only: the user's index


def _index_entries(repo: GitRepo) -> dict[str, str]:
    """Each index entry with its stat data, by path."""
    out = repo.git("ls-files", "-s", "--debug")
    entries: dict[str, str] = {}
    current = None
    for line in out.splitlines():
        if not line.startswith(" "):
            current = line.split("\t", 1)[1]
            entries[current] = line
        else:
            entries[current] += "\n" + line
    return entries


def test_git_index_keeps_every_other_staged_entry_exactly(tmp_path: Path) -> None:
    repo = GitRepo.init(tmp_path / "checkout")
    repo.write("kernels/softmax.py", KERNEL)
    repo.write("README.md", "notes\n")
    repo.write("setup.cfg", "[x]\n")
    repo.commit_all()
    repo.write("README.md", "staged edit\n")
    repo.write("new_module.py", "y = 2\n")
    repo.git("add", "README.md", "new_module.py")
    repo.write("README.md", "staged edit, then an unstaged one\n")
    repo.write("setup.cfg", "[x]\nunstaged = 1\n")
    kernel = repo.root / "kernels/softmax.py"
    snap = probe(kernel)
    before = _index_entries(repo)
    result = commit_winner(_request(kernel, KERNEL), snap)
    assert result.success, result.diagnostics
    after = _index_entries(repo)
    kernel_entry = after.pop("kernels/softmax.py")
    before.pop("kernels/softmax.py")
    assert after == before  # blob, mode and stat data of every other entry
    assert repo.git("rev-parse", ":kernels/softmax.py").strip() in kernel_entry
    assert repo.git("show", ":kernels/softmax.py") == WINNER
    assert repo.git("diff", "--cached", "--name-only").split() == ["README.md", "new_module.py"]
    assert repo.git("diff", "--name-only").split() == ["README.md", "setup.cfg"]
    assert repo.git("show", ":README.md") == "staged edit\n"


def test_git_staged_kernel_edit_stays_staged_with_the_agents_change_on_top(tmp_path: Path) -> None:
    repo = GitRepo.init(tmp_path / "checkout")
    repo.write("kernels/softmax.py", KERNEL)
    repo.commit_all()
    kernel = repo.root / "kernels/softmax.py"
    staged = KERNEL.replace(*USER_EDIT)
    kernel.write_text(staged)
    repo.git("add", "kernels/softmax.py")
    user = staged.replace("import triton\n", "import triton\n# unstaged note\n")
    kernel.write_text(user)
    snap = probe(kernel)
    result = commit_winner(_request(kernel, user), snap)
    assert result.success, result.diagnostics
    assert repo.at_head("kernels/softmax.py") == WINNER
    assert repo.git("show", ":kernels/softmax.py") == staged.replace("num_warps=4", "num_warps=16")
    assert repo.read("kernels/softmax.py") == user.replace("num_warps=4", "num_warps=16")


def test_git_detached_head_fails_cleanly(tmp_path: Path) -> None:
    repo = GitRepo.init(tmp_path / "checkout")
    repo.write("kernels/softmax.py", KERNEL)
    repo.commit_all()
    repo.git("checkout", "-q", "--detach")
    kernel = repo.root / "kernels/softmax.py"
    snap = probe(kernel)
    state = repo.state()
    result = commit_winner(_request(kernel, KERNEL), snap)
    assert not result.success and not result.conflict
    assert "HEAD is detached" in result.diagnostics
    assert repo.state() == state


def test_git_locked_index_fails_cleanly_and_keeps_the_lock(tmp_path: Path) -> None:
    repo = GitRepo.init(tmp_path / "checkout")
    repo.write("kernels/softmax.py", KERNEL)
    repo.commit_all()
    kernel = repo.root / "kernels/softmax.py"
    snap = probe(kernel)
    lock = repo.root / ".git/index.lock"
    lock.write_bytes(b"")
    state = repo.state()
    result = commit_winner(_request(kernel, KERNEL), snap)
    assert not result.success
    assert "the git index is locked" in result.diagnostics
    assert lock.exists()  # someone else's lock is never removed
    assert repo.state() == state


@needs_hg
def test_hg_locked_repository_fails_cleanly(tmp_path: Path) -> None:
    repo = HgRepo.init(tmp_path / "checkout")
    repo.write("kernels/softmax.py", KERNEL)
    repo.commit_all()
    kernel = repo.root / "kernels/softmax.py"
    snap = probe(kernel)
    os.symlink("otherhost:12345", repo.root / ".hg/wlock")
    result = commit_winner(_request(kernel, KERNEL), snap)
    assert not result.success
    assert "the Mercurial repository is locked" in result.diagnostics
    assert repo.read("kernels/softmax.py") == KERNEL


# --------------------------------------------------------------------------------------------
# Finding the repository


def test_kernel_outside_any_repository_is_a_clear_failure_when_committing(tmp_path: Path) -> None:
    kernel = tmp_path / "loose" / "softmax.py"
    kernel.parent.mkdir()
    kernel.write_text(KERNEL)
    snap = probe(kernel)
    assert snap.vcs is None
    result = commit_winner(_request(kernel, KERNEL), snap)
    assert not result.success and result.vcs is None
    assert result.diagnostics == (
        f"cannot commit the winner: {kernel} is not inside a git or Mercurial repository"
    )
    assert kernel.read_text() == KERNEL


@needs_hg
@pytest.mark.parametrize(("outer", "inner"), [("git", "hg"), ("hg", "git")])
def test_nested_repositories_the_deepest_root_wins(tmp_path: Path, outer: str, inner: str) -> None:
    _make_repo(outer, tmp_path / "outer")
    inner_repo = _make_repo(inner, tmp_path / "outer" / "vendor" / "inner")
    kernel = inner_repo.write("k/softmax.py", KERNEL)
    snap = probe(kernel)
    assert snap.vcs is VcsKind(inner)
    assert snap.root == inner_repo.root.resolve()
    assert snap.rel_path == "k/softmax.py"
    # An explicit choice reaches past the deeper repository.
    assert probe(kernel, vcs=outer).root == (tmp_path / "outer").resolve()


@needs_hg
def test_git_and_hg_at_the_same_root_is_ambiguous(tmp_path: Path) -> None:
    root = tmp_path / "both"
    GitRepo.init(root)
    HgRepo.init(root)
    kernel = root / "softmax.py"
    kernel.write_text(KERNEL)
    with pytest.raises(AmbiguousVcsError, match="pass --vcs git or --vcs hg"):
        probe(kernel)
    assert probe(kernel, vcs="hg").vcs is VcsKind.HG
    assert probe(kernel, vcs="git").vcs is VcsKind.GIT


def test_snapshot_records_head_committed_text_and_working_digest(repo: Repo) -> None:
    kernel = repo.root / "kernels/softmax.py"
    user = KERNEL.replace(*USER_EDIT)
    kernel.write_text(user)
    snap = probe(kernel)
    assert snap.head == repo.head()
    assert snap.committed_source == KERNEL
    assert snap.rel_path == "kernels/softmax.py"
    import hashlib

    assert snap.working_sha256 == "sha256:" + hashlib.sha256(user.encode()).hexdigest()


@needs_hg
def test_hg_kernel_marked_for_removal_is_not_committed(tmp_path: Path) -> None:
    repo = HgRepo.init(tmp_path / "checkout")
    repo.write("kernels/softmax.py", KERNEL)
    repo.commit_all()
    kernel = repo.root / "kernels/softmax.py"
    snap = probe(kernel)
    repo.hg("forget", "kernels/softmax.py")
    state = repo.state()
    result = commit_winner(_request(kernel, KERNEL), snap)
    assert not result.success
    assert "marked for removal" in result.diagnostics
    assert repo.state() == state


def test_crlf_kernel_read_with_universal_newlines_keeps_its_line_ends(tmp_path: Path) -> None:
    repo = GitRepo.init(tmp_path / "checkout")
    kernel = repo.root / "softmax.py"
    kernel.write_bytes(KERNEL.replace("\n", "\r\n").encode())
    repo.commit_all()
    snap = probe(kernel)
    # The run reads the kernel with universal newlines (read_text), so its texts have "\n".
    result = commit_winner(_request(kernel, kernel.read_text()), snap)
    assert result.success, result.diagnostics
    crlf_winner = WINNER.replace("\n", "\r\n").encode()
    at_head = subprocess.run(
        ["git", "cat-file", "blob", "HEAD:softmax.py"], cwd=repo.root, capture_output=True
    ).stdout
    assert at_head == crlf_winner
    assert kernel.read_bytes() == crlf_winner
