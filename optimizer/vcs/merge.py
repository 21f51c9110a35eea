"""Three-way merge of text files with a real diff3: `git merge-file`, else GNU `diff3 -m`.

`merge3(base, ours, theirs)` applies the change base -> theirs on top of ours. Overlapping
changes are a conflict: the result then carries no text to use.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from optimizer.vcs.common import VcsError, git_executable, run_tool, tool_env


class MergeTool(StrEnum):
    GIT = "git merge-file"
    DIFF3 = "diff3"


@dataclass(frozen=True)
class MergeResult:
    text: bytes | None  # None when the changes overlap
    conflicts: int
    tool: MergeTool

    @property
    def clean(self) -> bool:
        return self.conflicts == 0


def available_tool() -> MergeTool:
    """The merge tool this machine has: git merge-file, else diff3."""
    if git_executable():
        return MergeTool.GIT
    if shutil.which("diff3"):
        return MergeTool.DIFF3
    raise VcsError("no three-way merge tool found: install git or GNU diffutils (diff3)")


def merge3(base: bytes, ours: bytes, theirs: bytes, tool: MergeTool | None = None) -> MergeResult:
    """Merge the change base -> theirs into ours."""
    tool = tool or available_tool()
    if ours == base:
        return MergeResult(theirs, 0, tool)
    if theirs in (base, ours):
        return MergeResult(ours, 0, tool)
    with tempfile.TemporaryDirectory(prefix="tlxdb-merge-") as tmp:
        d = Path(tmp)
        (d / "base").write_bytes(base)
        (d / "ours").write_bytes(ours)
        (d / "theirs").write_bytes(theirs)
        if tool is MergeTool.GIT:
            res = run_tool(["git", "merge-file", "-p", "ours", "base", "theirs"], d, env=tool_env())
            if res.returncode < 0 or res.returncode > 127:
                raise VcsError(f"git merge-file failed: {res.reason()}")
            conflicts = res.returncode
        else:
            res = run_tool(["diff3", "-m", "ours", "base", "theirs"], d, env=tool_env())
            if res.returncode not in (0, 1):
                raise VcsError(f"diff3 failed: {res.reason()}")
            conflicts = res.returncode
    return MergeResult(None if conflicts else res.stdout, conflicts, tool)
