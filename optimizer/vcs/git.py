"""Committing one file in git without touching the user's index or other files.

The commit is made from a temporary index (GIT_INDEX_FILE): HEAD's tree with only the kernel's
entry replaced, committed with `git commit` so the repository's hooks and identity apply. The
user's index is held locked (`index.lock`, git's own protocol) from the first check to the end;
afterwards only the kernel's entry in it changes (its staged text plus the agent's change), and
every other entry keeps its bytes, mode and stat data.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import BinaryIO

from optimizer.vcs.common import (
    ToolResult,
    VcsConflictError,
    VcsError,
    run_tool,
    tool_env,
    write_file_atomically,
)
from optimizer.vcs.merge import merge3
from tlxstore.hashing import digest_bytes, digest_file

# Files in the git dir that mean an operation is half done; committing then would be wrong.
_IN_PROGRESS = {
    "MERGE_HEAD": "a merge",
    "CHERRY_PICK_HEAD": "a cherry-pick",
    "REVERT_HEAD": "a revert",
    "rebase-merge": "a rebase",
    "rebase-apply": "a rebase or git am",
    "BISECT_LOG": "a bisect",
}


def _git(
    root: Path, *args: str, input_bytes: bytes | None = None, index_file: Path | None = None
) -> ToolResult:
    env = tool_env({"GIT_INDEX_FILE": str(index_file)} if index_file else None)
    return run_tool(["git", *args], root, input_bytes=input_bytes, env=env)


def _git_ok(
    root: Path, *args: str, input_bytes: bytes | None = None, index_file: Path | None = None
) -> bytes:
    res = _git(root, *args, input_bytes=input_bytes, index_file=index_file)
    if not res.ok:
        raise VcsError(f"git {args[0]} failed: {res.reason()}")
    return res.stdout


def _literal(rel: str) -> str:
    return f":(literal){rel}"


def root_of(directory: Path) -> Path | None:
    """The top of the git work tree that holds `directory`, or None."""
    try:
        res = _git(directory, "rev-parse", "--show-toplevel")
    except VcsError:
        return None  # git is not installed
    if not res.ok or not res.stdout.strip():
        return None
    return Path(res.stdout.decode().strip()).resolve()


def head(root: Path) -> str | None:
    """HEAD's commit id, or None on an unborn branch."""
    res = _git(root, "rev-parse", "--verify", "-q", "HEAD^{commit}")
    return res.stdout.decode().strip() if res.ok else None


def committed(root: Path, rel: str) -> bytes | None:
    """The kernel's content at HEAD in working-tree form (filters applied), or None if absent."""
    if head(root) is None:
        return None
    res = _git(root, "cat-file", "--filters", f"HEAD:{rel}")
    return res.stdout if res.ok else None


def commit(
    *,
    root: Path,
    rel: str,
    expected_head: str,
    committed_before: bytes,
    working_before: bytes,
    new_committed: bytes,
    new_working: bytes,
    message: str,
) -> tuple[str, str]:
    """Commit `new_committed` as the kernel on top of HEAD, then leave `new_working` in the work
    tree and the user's staged text plus the agent's change in the index. Returns (revision,
    note); the note is empty unless something after the commit did not go as planned."""
    git_dir = Path(_git_ok(root, "rev-parse", "--absolute-git-dir").decode().strip())
    kernel = root / rel
    _check_state(root, git_dir, expected_head)
    lock = git_dir / "index.lock"
    fd = _lock_index(lock)
    try:
        with (
            os.fdopen(fd, "wb") as lock_file,
            tempfile.TemporaryDirectory(prefix="tlxdb-git-") as tmp,
        ):
            # Re-check under the lock: nothing may have moved since the run started.
            _check_state(root, git_dir, expected_head)
            if digest_file(kernel) != digest_bytes(working_before):
                raise VcsConflictError(
                    f"{rel} was edited during the run; the winner was not committed"
                )
            index = git_dir / "index"
            commit_entry, user_entry = _entries(root, rel, committed_before, new_committed)
            revision = _commit_from_private_index(root, index, Path(tmp), commit_entry, message)
            updated = _update_user_index(root, index, Path(tmp), user_entry, lock_file)
        if not updated.ok:
            return (
                revision,
                f"committed, but the index entry of {rel} was not updated: {updated.reason()}",
            )
        os.replace(lock, index)
    finally:
        if lock.exists():
            lock.unlink()
    if digest_file(kernel) != digest_bytes(working_before):
        return revision, f"committed; {rel} was edited while committing and was left as it is"
    write_file_atomically(kernel, new_working)
    return revision, ""


def _lock_index(lock: Path) -> int:
    """Take git's own index lock (create `index.lock` exclusively); its open descriptor."""
    try:
        return os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError as exc:
        raise VcsError(
            f"the git index is locked ({lock} exists): another git command is running, or one crashed"
        ) from exc


def _entries(
    root: Path, rel: str, committed_before: bytes, new_committed: bytes
) -> tuple[str, str]:
    """The kernel's index entries (`mode,blob,path`, blobs written): the one to commit (HEAD's
    mode, the new text) and the user's after it (their staged text plus the agent's change); a
    change that overlaps the staged edits is a conflict."""
    mode, staged_blob = _index_entry(root, rel)
    staged = _git_ok(root, "cat-file", "--filters", f"--path={rel}", staged_blob)
    merged_staged = merge3(committed_before, staged, new_committed)
    if merged_staged.text is None:
        raise VcsConflictError(
            f"the winner's change overlaps your staged edits to {rel}; nothing was committed"
        )
    head_mode = _head_mode(root, rel)
    commit_entry = f"{head_mode},{_hash_object(root, rel, new_committed)},{rel}"
    return commit_entry, f"{mode},{_hash_object(root, rel, merged_staged.text)},{rel}"


def _commit_from_private_index(
    root: Path, index: Path, tmp: Path, cacheinfo: str, message: str
) -> str:
    """The commit: HEAD's tree with only the kernel's entry (`cacheinfo`) replaced, from a
    private index, through `git commit` (hooks and identity apply); the new revision."""
    commit_index = tmp / "commit-index"
    shutil.copyfile(index, commit_index)
    _git_ok(root, "read-tree", "--reset", "HEAD", index_file=commit_index)
    _git_ok(root, "update-index", "--cacheinfo", cacheinfo, index_file=commit_index)
    msg = tmp / "message"
    msg.write_text(message, encoding="utf-8")
    res = _git(
        root, "commit", "-q", "--cleanup=whitespace", "-F", str(msg), index_file=commit_index
    )
    if not res.ok:
        raise VcsError(f"git commit failed: {res.reason()}")
    return _git_ok(root, "rev-parse", "HEAD").decode().strip()


def _update_user_index(
    root: Path, index: Path, tmp: Path, cacheinfo: str, lock_file: BinaryIO
) -> ToolResult:
    """The user's index with only the kernel's entry moved, written into index.lock (renamed
    over the index by the caller when this succeeded)."""
    user_index = tmp / "user-index"
    shutil.copyfile(index, user_index)
    updated = _git(root, "update-index", "--cacheinfo", cacheinfo, index_file=user_index)
    if updated.ok:
        lock_file.write(user_index.read_bytes())
        lock_file.flush()
        os.fsync(lock_file.fileno())
    return updated


def _check_state(root: Path, git_dir: Path, expected_head: str) -> None:
    for name, what in _IN_PROGRESS.items():
        if (git_dir / name).exists():
            raise VcsError(f"{what} is in progress in {root}; finish it before committing")
    if not _git(root, "symbolic-ref", "-q", "HEAD").ok:
        raise VcsError(f"HEAD is detached in {root}; check out a branch to commit the winner")
    now = head(root)
    if now != expected_head:
        raise VcsConflictError(
            f"HEAD moved from {expected_head[:12]} to {(now or 'nothing')[:12]} during the run; "
            "the winner was not committed"
        )


def _index_entry(root: Path, rel: str) -> tuple[str, str]:
    out = _git_ok(root, "ls-files", "-s", "--", _literal(rel)).decode()
    entries = [line.split("\t", 1)[0].split() for line in out.splitlines() if line]
    if not entries:
        raise VcsError(
            f"{rel} is not in the git index (removed with git rm?); nothing was committed"
        )
    if len(entries) > 1 or entries[0][2] != "0":
        raise VcsError(f"{rel} has unresolved merge conflicts in the index; resolve them first")
    mode, blob, _stage = entries[0]
    return mode, blob


def _head_mode(root: Path, rel: str) -> str:
    out = _git_ok(root, "ls-tree", "HEAD", "--", rel).decode().strip()
    if not out:
        raise VcsError(f"{rel} is not in HEAD")
    return out.split()[0]


def _hash_object(root: Path, rel: str, data: bytes) -> str:
    return (
        _git_ok(root, "hash-object", "-w", f"--path={rel}", "--stdin", input_bytes=data)
        .decode()
        .strip()
    )
