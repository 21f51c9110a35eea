"""A git repository holding the vecadd kernel, for CLI tests that commit the winner."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from support.bundles import kernel_copy

IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}


def git(repo: Path, *args: str) -> str:
    """`git ARGS` in `repo` with a fixed identity and no user configuration; its stdout."""
    env = {**IDENTITY, "PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": str(repo)}
    return subprocess.run(
        ["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True
    ).stdout


def kernel_in_git(repo: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The vecadd kernel committed once in a new repository `repo`; the identity is set in the
    environment, so the run's own commit has one."""
    kernel = kernel_copy(repo)
    git(repo, "init", "-q")
    git(repo, "add", kernel.name)
    git(repo, "commit", "-q", "-m", "kernel")
    for k, v in IDENTITY.items():
        monkeypatch.setenv(k, v)
    return kernel
