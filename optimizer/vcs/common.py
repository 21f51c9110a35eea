"""What the git and Mercurial backends share: running a VCS command, its errors, file writes.

Invariants:
- VCS commands run with the caller's environment minus the variables that would point git at
  another repository or index (GIT_DIR, GIT_WORK_TREE, GIT_INDEX_FILE, ...); os.environ is
  never mutated.
- A failure of a VCS command becomes a VcsError whose message is one line: the command's most
  telling line of output.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tlxstore.errors import TlxdbError

# Variables that redirect git away from the repository the kernel lives in.
_GIT_REDIRECTS = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
)

# What hg prints between a hook's own words and its abort line.
_HG_TRANSACTION_NOISE = {"transaction abort!", "rollback completed"}

# How long a Mercurial command waits for a repository lock before it gives up, in seconds.
HG_LOCK_TIMEOUT_S = 5


class VcsError(TlxdbError):
    """The version control operation failed."""


class VcsConflictError(VcsError):
    """The kernel or its repository changed since the run started; nothing was committed."""


class AmbiguousVcsError(VcsError):
    """The kernel is in a git and a Mercurial repository with the same root; pass --vcs git or --vcs hg."""


@dataclass(frozen=True)
class ToolResult:
    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def reason(self) -> str:
        """The most telling line of the output, for a one-line diagnostic."""
        return telling_line(
            self.stderr.decode("utf-8", "replace") + "\n" + self.stdout.decode("utf-8", "replace")
        )


def telling_line(output: str) -> str:
    """One line for a failed command: its first 'fatal:'/'error:'/'abort:' line (followed by what
    the hook said, when a hook failed), else its last non-empty line."""
    lines = [" ".join(line.split()) for line in output.splitlines()]
    lines = [line for line in lines if line]
    for i, line in enumerate(lines):
        if line.lower().startswith(("fatal:", "error:", "abort:")):
            said = [other for other in lines[:i] if other not in _HG_TRANSACTION_NOISE]
            if "hook" in line and said:
                return f"{line}: {said[0]}"
            return line
    return lines[-1] if lines else "(no output)"


def tool_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a VCS command: the caller's, without repository redirects, plus extra."""
    env = {k: v for k, v in os.environ.items() if k not in _GIT_REDIRECTS}
    env["LC_ALL"] = "C"
    env["GIT_TERMINAL_PROMPT"] = "0"
    if extra:
        env.update(extra)
    return env


def run_tool(
    argv: Sequence[str],
    cwd: Path,
    *,
    input_bytes: bytes | None = None,
    env: Mapping[str, str] | None = None,
) -> ToolResult:
    """Run one VCS command; a missing executable is a VcsError, a non-zero exit is returned."""
    try:
        proc = subprocess.run(
            list(argv),
            cwd=cwd,
            input=input_bytes if input_bytes is not None else b"",
            capture_output=True,
            env=dict(env) if env is not None else tool_env(),
            check=False,
        )
    except FileNotFoundError as exc:
        raise VcsError(f"{argv[0]} is not installed") from exc
    return ToolResult(proc.returncode, proc.stdout, proc.stderr)


def git_executable() -> str | None:
    """The git command on PATH, or None."""
    return shutil.which("git")


def hg_executable() -> str | None:
    """The hg command: on PATH, else the one installed beside this Python (pip install mercurial)."""
    found = shutil.which("hg")
    if found:
        return found
    beside = Path(sys.executable).parent / "hg"
    return str(beside) if beside.is_file() and os.access(beside, os.X_OK) else None


def write_file_atomically(path: Path, data: bytes) -> None:
    """Replace a file's content in one step (temporary file in the same folder, then rename),
    keeping its permission bits."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tlxdb-tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        shutil.copymode(path, tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
