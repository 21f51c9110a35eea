"""`--provider command --provider-command CMD`: an external coding agent (Codex CLI, Claude Code,
a script) proposes by editing a file.

Each proposal runs CMD (through /bin/sh, so pipes and quoting work) in a fresh workspace holding
candidate.py (the parent), original.py, reference_kernel.py when the bundle has one, and
prompt.md (the full context, also written to the agent's stdin). The agent edits candidate.py
and may write candidate_metadata.json. The agent runs in its own process group; on timeout the
whole group is killed.

Invariants:
- A timeout, a non-zero exit, an edited original.py or reference_kernel.py, a missing or
  unchanged candidate.py, or an invalid candidate_metadata.json raises ProviderError naming the
  agent's last stderr lines; the loop records it as a retryable failure.
- Every run of the agent, failed or not, is one ModelExchanged event (provider "command",
  model = the command), its output passed through `redact`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from optimizer.providers.base import (
    Proposal,
    ProviderContext,
    ProviderError,
    Recorder,
    SearchExhausted,
)
from optimizer.providers.prompts.render import (
    PromptBudget,
    PromptMode,
    RenderedPrompt,
    render_prompt,
)
from optimizer.providers.prompts.reply import CandidateMetadata, ReplyParseError, parse_metadata
from optimizer.providers.support import parse_options, redact
from tlxstore.events import ModelExchanged, new_event_id

CANDIDATE = "candidate.py"
ORIGINAL = "original.py"
REFERENCE = "reference_kernel.py"
PROMPT = "prompt.md"
METADATA = "candidate_metadata.json"
# An agent's stdout can be megabytes of transcript; the recorded reply keeps its end, where
# agents summarize. The candidate itself is recorded whole by the loop (SourceStored).
AGENT_OUTPUT_TAIL_CHARS = 20_000


class CommandOptions(BaseModel):
    """Options of the command provider. Unknown keys (other providers' options) are ignored."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    command: str = Field(min_length=1)
    agent_timeout_s: float = Field(1800.0, gt=0)
    workspace: Path | None = (
        None  # agent workspaces go under <workspace>/agents; None: a temporary folder, removed
    )
    stderr_tail_lines: int = Field(20, ge=1)  # lines of the agent's stderr in a failure message
    budget: PromptBudget = Field(default_factory=PromptBudget)


class _AgentRun(BaseModel):
    exit_status: int | None  # None when it timed out
    stdout: str
    stderr: str
    latency_ms: float


class CommandProvider:
    name = "command"

    def __init__(self, options: CommandOptions) -> None:
        self.options = options
        self.model: str | None = options.command

    def _run_agent(self, workspace: Path, prompt: RenderedPrompt) -> _AgentRun:
        started = time.monotonic()
        proc = subprocess.Popen(
            ["/bin/sh", "-c", self.options.command],
            cwd=workspace,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own process group, killed whole on timeout
        )
        try:
            out, err = proc.communicate(prompt.text, timeout=self.options.agent_timeout_s)
            status: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            status = None
        return _AgentRun(
            exit_status=status,
            stdout=out or "",
            stderr=err or "",
            latency_ms=(time.monotonic() - started) * 1e3,
        )

    def _check(
        self, workspace: Path, ctx: ProviderContext, run: _AgentRun
    ) -> tuple[str, CandidateMetadata | None]:
        """The candidate source and metadata, or ProviderError's reason."""
        if run.exit_status is None:
            raise _AgentFailure(f"agent timed out after {self.options.agent_timeout_s:g} s")
        if run.exit_status != 0:
            raise _AgentFailure(f"agent exited with status {run.exit_status}")
        original = workspace / ORIGINAL
        if not original.is_file() or original.read_text() != ctx.original_source:
            raise _AgentFailure(f"agent modified {ORIGINAL}")
        if ctx.reference_source is not None:
            ref = workspace / REFERENCE
            if not ref.is_file() or ref.read_text() != ctx.reference_source:
                raise _AgentFailure(f"agent modified {REFERENCE}")
        candidate = workspace / CANDIDATE
        if not candidate.is_file():
            raise _AgentFailure(f"agent removed {CANDIDATE}")
        source = candidate.read_text()
        if source.strip() == ctx.parent_source.strip():
            raise _AgentFailure(f"agent left {CANDIDATE} unchanged")
        meta_path = workspace / METADATA
        metadata = None
        if meta_path.is_file():
            try:
                metadata = parse_metadata(meta_path.read_text())
            except ReplyParseError as e:
                raise _AgentFailure(e.message) from None
        return source, metadata

    def _stderr_tail(self, stderr: str) -> str:
        lines = [ln.strip() for ln in stderr.strip().splitlines() if ln.strip()]
        return " | ".join(lines[-self.options.stderr_tail_lines :])

    def _propose_in(self, workspace: Path, ctx: ProviderContext, record: Recorder) -> Proposal:
        prompt = render_prompt(ctx, PromptMode.COMMAND, self.options.budget)
        (workspace / CANDIDATE).write_text(ctx.parent_source)
        (workspace / ORIGINAL).write_text(ctx.original_source)
        if ctx.reference_source is not None:
            (workspace / REFERENCE).write_text(ctx.reference_source)
        (workspace / PROMPT).write_text(prompt.text)
        run = self._run_agent(workspace, prompt)
        exchange_id = new_event_id()
        try:
            source, metadata = self._check(workspace, ctx, run)
            error = None
        except _AgentFailure as f:
            tail = redact(self._stderr_tail(run.stderr))
            error = f"{f.reason}; stderr: {tail}" if tail else f.reason
        record(
            ModelExchanged(
                exchange_id=exchange_id,
                provider=self.name,
                model=self.model,
                prompt=prompt.text,
                reply=redact(run.stdout[-AGENT_OUTPUT_TAIL_CHARS:]),
                error=error,
                attempt=1,
                latency_ms=run.latency_ms,
            )
        )
        if error is not None:
            raise ProviderError(f"command agent failed: {error}")
        if metadata is None:
            return Proposal(
                source=source,
                hypothesis=f"not stated: the agent wrote no {METADATA}",
                prompt_hash=prompt.prompt_hash,
                exchange_id=exchange_id,
            )
        return Proposal(
            source=source,
            **metadata.model_dump(exclude={"hypothesis_kind"}),
            hypothesis_kind=metadata.hypothesis_kind.value,
            prompt_hash=prompt.prompt_hash,
            exchange_id=exchange_id,
        )

    def propose(self, ctx: ProviderContext, record: Recorder) -> Proposal | SearchExhausted:
        """Run the agent once in a fresh workspace and return what it wrote to candidate.py."""
        if self.options.workspace is None:
            with tempfile.TemporaryDirectory(prefix="tlxdb-agent-") as tmp:
                return self._propose_in(Path(tmp), ctx, record)
        workspace = (
            self.options.workspace
            / "agents"
            / f"r{ctx.round:03d}-c{ctx.candidate_index:02d}-{uuid.uuid4().hex[:6]}"
        )
        workspace.mkdir(parents=True)
        return self._propose_in(workspace, ctx, record)


class _AgentFailure(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def create(options: Any) -> CommandProvider:
    """The command provider from ProviderOptions or a mapping (keys: command, workspace and the optional CommandOptions fields)."""
    return CommandProvider(
        parse_options(CommandOptions, options, "command", {"command": "--provider-command CMD"})
    )
