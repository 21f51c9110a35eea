"""A real Provider for tests: proposes a scripted list of edits of the parent, in order.

Stateless across processes: the next step is the first one whose knobs this run has not proposed
yet (read from the context), so a killed and resumed run continues the script where it stopped.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from optimizer.providers.base import Proposal, ProviderContext, Recorder, SearchExhausted


@dataclass(frozen=True)
class Step:
    knobs: dict
    edit: Callable[[str], str]
    hypothesis: str = "scripted"
    change: str = ""


def set_block(n: int) -> Step:
    return Step(
        knobs={"BLOCK_SIZE": n},
        edit=lambda src: re.sub(r"^BLOCK_SIZE = \d+", f"BLOCK_SIZE = {n}", src, flags=re.M),
        hypothesis=f"fewer, wider programs: BLOCK_SIZE {n} cuts interpreter launches",
        change=f"BLOCK_SIZE={n}",
    )


def replace(old: str, new: str, knobs: dict, hypothesis: str = "scripted edit") -> Step:
    return Step(
        knobs=knobs,
        edit=lambda src: src.replace(old, new),
        hypothesis=hypothesis,
        change=f"{old} -> {new}",
    )


def constant(source: str, knobs: dict, hypothesis: str = "scripted source") -> Step:
    return Step(knobs=knobs, edit=lambda _src: source, hypothesis=hypothesis)


@dataclass
class ScriptedProvider:
    steps: list[Step]
    name: str = "scripted"
    model: str | None = None
    contexts: list[ProviderContext] = field(default_factory=list)

    def propose(self, ctx: ProviderContext, record: Recorder) -> Proposal | SearchExhausted:
        self.contexts.append(ctx)
        tried = [m.knobs for m in ctx.measured if m.run_id == ctx.run_id]
        for step in self.steps:
            if step.knobs not in tried:
                return Proposal(
                    source=step.edit(ctx.parent_source),
                    hypothesis=step.hypothesis,
                    change=step.change,
                    expected_effect="lower median",
                    risk="low",
                    knobs=step.knobs,
                )
        return SearchExhausted(reason="the script is finished")
