"""Committing the winner to git or Mercurial without touching the user's other work.

`probe(kernel_path, vcs)` is taken when the run starts; `commit_winner(request, snapshot)` at
its end. Invariants:
- The repository is found from the kernel's path; the deepest repository root wins; a git and a
  Mercurial repository with the same root is an AmbiguousVcsError (pass --vcs).
- Only the agent's change lands in the commit: the committed kernel merged with the change
  run-start text -> winner (a real diff3). The user's uncommitted edits to the kernel stay
  uncommitted and present in the file; other files, and in git every other index entry, are
  untouched. An overlap with the user's edits is a conflict.
- If the kernel file, its committed version or HEAD changed since the snapshot, nothing is
  committed (conflict). Any VCS failure (a hook that rejects, no identity, a detached or locked
  repository) leaves the user's files exactly as they were and is reported in one line.
- commit_winner never raises for these: it returns a CommitAttempted event saying what happened.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from types import ModuleType

from pydantic import BaseModel, ConfigDict

from optimizer.evaluation.evaluator import Evaluator
from optimizer.evaluation.requests import EvalRequest
from optimizer.vcs import git as vcs_git
from optimizer.vcs import hg as vcs_hg
from optimizer.vcs.common import AmbiguousVcsError, VcsConflictError, VcsError
from optimizer.vcs.merge import merge3
from optimizer.vcs.message import change_summary, commit_subject, render_commit_message
from tlxstore.errors import TlxdbError
from tlxstore.events import BASELINE_ID, CaseSpeedup, CommitAttempted
from tlxstore.fold import RunState
from tlxstore.hashing import digest_bytes, digest_file

__all__ = [
    "AmbiguousVcsError",
    "CommitRequest",
    "VcsConflictError",
    "VcsError",
    "VcsKind",
    "VcsSnapshot",
    "commit_for_run",
    "commit_winner",
    "harness_reverifier",
    "probe",
    "request_for_run",
    "snapshot_for_run",
]

# The candidate id under which a merged source is re-verified (its events are not kept).
REVERIFY_ID = "commit-reverify"


class VcsKind(StrEnum):
    GIT = "git"
    HG = "hg"


_BACKENDS: dict[VcsKind, ModuleType] = {VcsKind.GIT: vcs_git, VcsKind.HG: vcs_hg}
_NAMES = {VcsKind.GIT: "git", VcsKind.HG: "Mercurial"}


class VcsSnapshot(BaseModel):
    """The kernel's repository as it was when the run started."""

    model_config = ConfigDict(frozen=True)

    kernel_path: Path  # absolute, symlinks resolved
    working_sha256: str  # tagged digest of the kernel file's bytes
    vcs: VcsKind | None = None  # None: not inside a repository of the requested kind
    root: Path | None = None
    rel_path: str | None = None  # the kernel relative to root, with '/'
    head: str | None = None  # HEAD (git) or the working parent (hg); None when unborn
    committed_source: str | None = None  # the kernel's text at head; None when not committed
    detail: str = ""  # why vcs is None


class CommitRequest(BaseModel):
    """What to commit: the run-start text, the winner, and the evidence for the message."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    candidate_id: str
    kernel_path: Path
    base_source: str  # the kernel text the run started from (the working file at run start)
    winner_source: str
    subject: str  # see commit_message.commit_subject
    summary: str = ""
    cases: list[CaseSpeedup] = []
    speedup: float | None = None  # weighted geometric mean over cases
    ci_low: float | None = None
    ci_high: float | None = None
    reverify: Callable[[str], bool]  # harness verification of a source that differs from the winner


def probe(kernel_path: str | Path, vcs: str = "auto") -> VcsSnapshot:
    """The repository state at run start. Raises AmbiguousVcsError when git and Mercurial share
    the deepest root under vcs='auto'; outside any repository the snapshot has vcs=None."""
    kernel = Path(kernel_path).resolve()
    if not kernel.is_file():
        raise VcsError(f"kernel {kernel} is not a file")
    working = kernel.read_bytes()
    base = VcsSnapshot(kernel_path=kernel, working_sha256=digest_bytes(working))
    kinds = [VcsKind.GIT, VcsKind.HG] if vcs == "auto" else [VcsKind(vcs)]
    roots = {kind: _BACKENDS[kind].root_of(kernel.parent) for kind in kinds}
    found = {kind: root for kind, root in roots.items() if root is not None}
    if not found:
        wanted = " or ".join(_NAMES[k] for k in kinds)
        return base.model_copy(update={"detail": f"{kernel} is not inside a {wanted} repository"})
    deepest = max(len(root.parts) for root in found.values())
    at_deepest = [kind for kind, root in found.items() if len(root.parts) == deepest]
    if len(at_deepest) > 1:
        raise AmbiguousVcsError(
            f"{kernel} is in a git and a Mercurial repository rooted at {found[at_deepest[0]]}; "
            "pass --vcs git or --vcs hg"
        )
    kind = at_deepest[0]
    root = found[kind]
    backend = _BACKENDS[kind]
    rel = kernel.relative_to(root).as_posix()
    committed = backend.committed(root, rel)
    return base.model_copy(
        update={
            "vcs": kind,
            "root": root,
            "rel_path": rel,
            "head": backend.head(root),
            "committed_source": None if committed is None else _decode(committed, rel),
        }
    )


def commit_winner(request: CommitRequest, snapshot: VcsSnapshot) -> CommitAttempted:
    """Commit the winner's change to the kernel (see the module docstring for what it touches)."""
    message = render_commit_message(
        request.subject,
        summary=request.summary,
        cases=request.cases,
        speedup=request.speedup,
        ci_low=request.ci_low,
        ci_high=request.ci_high,
    )
    fields: dict[str, object] = {
        "candidate_id": request.candidate_id,
        "vcs": snapshot.vcs.value if snapshot.vcs else None,
        "rev_before": snapshot.head,
        "subject": message.splitlines()[0],
        "kernel_path": str(snapshot.kernel_path),
        "success": False,
    }
    try:
        fields.update(_commit(request, snapshot, message), success=True)
    except _Failed as exc:
        fields.update(exc.outcome, conflict=exc.conflict, diagnostics=exc.message)
    except VcsConflictError as exc:
        fields.update(conflict=True, diagnostics=exc.message)
    except TlxdbError as exc:
        fields.update(diagnostics=exc.message)
    return CommitAttempted.model_validate(fields)


def _commit(request: CommitRequest, snap: VcsSnapshot, message: str) -> dict[str, object]:
    if snap.vcs is None or snap.root is None or snap.rel_path is None:
        raise VcsError(f"cannot commit the winner: {snap.detail}")
    rel = snap.rel_path
    name = _NAMES[snap.vcs]
    if Path(request.kernel_path).resolve() != snap.kernel_path:
        raise VcsError(
            f"the request is for {request.kernel_path}, the snapshot for {snap.kernel_path}"
        )
    if snap.head is None or snap.committed_source is None:
        raise VcsError(
            f"{rel} has no committed version in {name}; commit it once, then commit the winner"
        )
    encode = _encoder(request.base_source, snap.working_sha256)
    if encode is None:
        raise VcsConflictError(
            f"{rel} changed between the run's start and its snapshot; nothing was committed"
        )
    if digest_file(snap.kernel_path) != snap.working_sha256:
        raise VcsConflictError(f"{rel} was edited during the run; the winner was not committed")
    backend = _BACKENDS[snap.vcs]
    committed = snap.committed_source.encode("utf-8")  # what HEAD holds: HEAD did not move
    base = encode(request.base_source)
    winner = encode(request.winner_source)
    if winner == base:
        raise VcsError("the winner is identical to the kernel; there is nothing to commit")
    merged = merge3(base, committed, winner)
    if merged.text is None:
        raise VcsConflictError(
            f"the winner's change overlaps your uncommitted edits to {rel} "
            f"({merged.conflicts} conflicting region(s)); nothing was committed"
        )
    if merged.text == committed:
        raise VcsError(
            f"the winner's change is already in the committed {rel}; there is nothing to commit"
        )
    outcome: dict[str, object] = {}
    if merged.text != winner:
        # Re-verifying takes a while: first make sure there is still something to commit onto.
        head_now = backend.head(snap.root)
        if head_now != snap.head:
            raise VcsConflictError(
                f"HEAD moved from {snap.head[:12]} to {(head_now or 'nothing')[:12]} during the run; "
                "the winner was not committed"
            )
        ok = request.reverify(merged.text.decode("utf-8"))
        outcome["reverified"] = ok
        if not ok:
            raise _Failed(
                "the winner merged onto the committed kernel failed verification; nothing was committed",
                outcome,
            )
    try:
        revision, note = backend.commit(
            root=snap.root,
            rel=rel,
            expected_head=snap.head,
            committed_before=committed,
            working_before=base,
            new_committed=merged.text,
            new_working=winner,
            message=message,
        )
    except VcsError as exc:
        raise _Failed(exc.message, outcome, conflict=isinstance(exc, VcsConflictError)) from exc
    return {
        **outcome,
        "rev_after": revision,
        "committed_source_hash": digest_bytes(merged.text),
        "diagnostics": note,
    }


class _Failed(VcsError):
    """A failure that already knows part of the outcome (the re-verification, the merged hash)."""

    def __init__(self, message: str, outcome: dict[str, object], conflict: bool = False) -> None:
        super().__init__(message)
        self.outcome = outcome
        self.conflict = conflict


def _encoder(base_source: str, working_sha256: str) -> Callable[[str], bytes] | None:
    """How run texts become file bytes: UTF-8, with CRLF line ends when the file had them (the
    run reads the kernel with universal newlines). None when base_source is not the file."""

    def utf8(text: str) -> bytes:
        return text.encode("utf-8")

    def crlf(text: str) -> bytes:
        return text.replace("\r\n", "\n").replace("\n", "\r\n").encode("utf-8")

    for encode in (utf8, crlf):
        if digest_bytes(encode(base_source)) == working_sha256:
            return encode
    return None


def _decode(data: bytes, rel: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise VcsError(f"the committed {rel} is not UTF-8 text") from exc


# --------------------------------------------------------------------------------------------
# The run's side: a snapshot at start, a commit request built from the run's events at the end


def snapshot_for_run(kernel_path: str | Path, vcs: str = "auto") -> VcsSnapshot:
    """The snapshot a run takes at its start (probe; AmbiguousVcsError is a configuration error)."""
    return probe(kernel_path, vcs)


def request_for_run(
    state: RunState,
    candidate_id: str,
    kernel_path: str | Path,
    commit_message: str | None,
    reverify: Callable[[str], bool],
) -> CommitRequest:
    """The commit request for a run's winner, from the run's events alone: the baseline's text,
    the winner's text, its commit title and summary, and the revalidation's per-case table."""
    baseline = state.candidates[BASELINE_ID]
    winner = state.candidates[candidate_id]
    proposal = winner.proposal
    revalidation = next(
        (r for r in reversed(state.revalidations) if r.candidate_id == candidate_id), None
    )
    measured = revalidation or winner.decision
    cases = list(measured.cases) if measured else []
    speedup = measured.speedup if measured else None
    return CommitRequest(
        candidate_id=candidate_id,
        kernel_path=Path(kernel_path),
        base_source=state.sources[baseline.proposal.source_hash].text,
        winner_source=state.sources[proposal.source_hash].text,
        subject=commit_subject(
            kernel_path,
            commit_message=commit_message,
            commit_title=proposal.commit_title,
            speedup=speedup,
        ),
        summary=proposal.commit_summary or change_summary(proposal),
        cases=cases,
        speedup=speedup,
        ci_low=measured.ci_low if measured else None,
        ci_high=measured.ci_high if measured else None,
        reverify=reverify,
    )


def commit_for_run(
    state: RunState,
    candidate_id: str,
    kernel_path: str | Path,
    commit_message: str | None,
    snapshot: VcsSnapshot,
    reverify: Callable[[str], bool],
) -> CommitAttempted:
    """Commit a run's winner (request_for_run, then commit_winner)."""
    return commit_winner(
        request_for_run(state, candidate_id, kernel_path, commit_message, reverify), snapshot
    )


def harness_reverifier(evaluator: Evaluator, timeout_s: float) -> Callable[[str], bool]:
    """A reverify callable that builds and verifies a source with the run's harness (every
    protected case, fresh inputs, the guards) and benchmarks it once; its events are not kept:
    the outcome is recorded in CommitAttempted.reverified."""

    def reverify(source: str) -> bool:
        summary = evaluator.evaluate(
            EvalRequest(
                candidate_id=REVERIFY_ID,
                source=source,
                repetitions=1,
                timeout_s=timeout_s,
                profile=False,
            ),
            lambda _event: None,
        )
        return summary.built and summary.verified and not summary.blocked_by_guard

    return reverify
