"""Committing one file in Mercurial without touching the user's other files.

Mercurial has no index, so the kernel file is rewritten for the duration of `hg commit FILE`
(which commits that file alone; other dirty files stay dirty): it holds the committed version
plus the agent's change while the commit runs, then gets the user's edits plus the winner. If
the commit fails, the user's bytes are put back. While the file is rewritten a copy of the
user's version sits in `.hg/tlxdb-backup/` (removed afterwards), so even a killed process
loses nothing.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from optimizer.vcs.common import (
    HG_LOCK_TIMEOUT_S,
    ToolResult,
    VcsConflictError,
    VcsError,
    hg_executable,
    run_tool,
    tool_env,
    write_file_atomically,
)
from tlxstore.hashing import digest_bytes, digest_file

_NULL_NODE = "0" * 40


def _hg(root: Path, *args: str) -> ToolResult:
    exe = hg_executable()
    if exe is None:
        raise VcsError("Mercurial (hg) is not installed")
    # HGPLAIN keeps the output of queries free of the user's aliases and defaults; it is left off
    # for `hg commit`, where it would make hg invent a username instead of refusing to commit.
    plain = {} if args[0] == "commit" else {"HGPLAIN": "1"}
    return run_tool(
        [exe, "--config", f"ui.timeout={HG_LOCK_TIMEOUT_S}", *args], root, env=tool_env(plain)
    )


def _hg_ok(root: Path, *args: str) -> bytes:
    res = _hg(root, *args)
    if not res.ok:
        raise VcsError(f"hg {args[0]} failed: {res.reason()}")
    return res.stdout


def root_of(directory: Path) -> Path | None:
    """The root of the Mercurial repository that holds `directory`, or None: the nearest folder
    upwards with a `.hg` folder, which is how hg itself finds it (without starting hg)."""
    for folder in (directory.resolve(), *directory.resolve().parents):
        if (folder / ".hg").is_dir():
            return folder
    return None


def head(root: Path) -> str | None:
    """The working directory's parent revision (full node), or None in an empty repository."""
    node = _hg_ok(root, "log", "-r", ".", "-T", "{node}").decode().strip()
    return None if not node or node == _NULL_NODE else node


def committed(root: Path, rel: str) -> bytes | None:
    """The kernel's content at the working directory's parent, or None if absent there."""
    res = _hg(root, "cat", "-r", ".", f"path:{rel}")
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
    """Commit `new_committed` as the kernel on top of the working parent, then leave
    `new_working` in the working copy. Returns (revision, note)."""
    kernel = root / rel
    hg_dir = root / ".hg"
    for lock in (hg_dir / "wlock", hg_dir / "store" / "lock"):
        if os.path.lexists(lock):
            raise VcsError(
                f"the Mercurial repository is locked ({lock} exists); another hg command is running"
            )
    # One query for the working directory: its parents, the username, the files it removes.
    template = r'{p1node}\t{p2node}\t{config("ui", "username")}\n{join(file_dels, "\n")}\n'
    first, *removed = _hg_ok(root, "log", "-r", "wdir()", "-T", template).decode().splitlines()
    p1, p2, username = first.split("\t", 2)
    if not (username.strip() or os.environ.get("HGUSER") or os.environ.get("EMAIL")):
        # Left alone, a non-interactive hg commits as user@host; a commit needs a real identity.
        raise VcsError("no Mercurial username is configured (set ui.username in ~/.hgrc)")
    if p2 != _NULL_NODE:
        raise VcsError(f"an uncommitted merge is in progress in {root}; commit or abort it first")
    now = None if p1 == _NULL_NODE else p1
    if now != expected_head:
        raise VcsConflictError(
            f"the working parent moved from {expected_head[:12]} to {(now or 'nothing')[:12]} "
            "during the run; the winner was not committed"
        )
    if rel in removed:
        raise VcsError(
            f"{rel} is marked for removal (hg remove or hg forget); nothing was committed"
        )
    if digest_file(kernel) != digest_bytes(working_before):
        raise VcsConflictError(f"{rel} was edited during the run; the winner was not committed")

    backup_dir = hg_dir / "tlxdb-backup"
    backup_dir.mkdir(exist_ok=True)
    fd, backup_name = tempfile.mkstemp(prefix=f"{kernel.name}.", suffix=".orig", dir=backup_dir)
    backup = Path(backup_name)
    with os.fdopen(fd, "wb") as f:
        f.write(working_before)
        f.flush()
        os.fsync(f.fileno())
    committed_ok = False
    try:
        write_file_atomically(kernel, new_committed)
        with tempfile.TemporaryDirectory(prefix="tlxdb-hg-") as tmp:
            msg = Path(tmp) / "message"
            msg.write_text(message, encoding="utf-8")
            res = _hg(root, "commit", "-l", str(msg), f"path:{rel}")
        if not res.ok:
            raise VcsError(f"hg commit failed: {res.reason()}")
        committed_ok = True
        revision = head(root) or ""
    finally:
        write_file_atomically(kernel, new_working if committed_ok else working_before)
        backup.unlink()
        if not any(backup_dir.iterdir()):
            backup_dir.rmdir()
    return revision, ""
