"""Turn a ProviderContext into prompt text, from the template files beside this module.

Invariants:
- All prompt wording lives in templates/ and guidance/; this module selects and measures.
- Built-in guidance is chosen by guidance/manifest.json from the target's backend and
  architecture family; an architecture in no known family gets only the documents that name no
  family. The bundle's optimization_guidance comes after the built-in guidance.
- The parent source is always given whole. Lists that grow with history (exclusions, measured
  candidates, prior runs' best ideas) are deduplicated and cut to a token budget, never to a
  count. Tokens are estimated as ceil(characters / 4), the usual rule of thumb for English text
  and code with BPE tokenizers; it is an estimate, not a tokenizer.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
from pydantic import BaseModel, ConfigDict, Field

from optimizer.providers.base import Exclusion, MeasuredCandidate, ProviderContext
from tlxstore.events import HypothesisKind, Outcome
from tlxstore.hashing import digest_json

PROMPTS_DIR = Path(__file__).resolve().parent
TEMPLATES_DIR = PROMPTS_DIR / "templates"
GUIDANCE_DIR = PROMPTS_DIR / "guidance"
CHARS_PER_TOKEN = 4


class PromptMode(StrEnum):
    LLM = "llm"  # the model answers with a JSON reply
    COMMAND = "command"  # an agent edits candidate.py in a workspace


class PromptBudget(BaseModel):
    """Token budgets (estimated, see estimate_tokens) for the lists that grow with history."""

    model_config = ConfigDict(frozen=True)

    exclusions_tokens: int = Field(default=2000, ge=0)
    measured_tokens: int = Field(default=1500, ge=0)
    prior_best_tokens: int = Field(default=800, ge=0)
    nearest_tokens: int = Field(default=800, ge=0)


class GuidanceDoc(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    title: str
    file: str
    backends: list[str]
    families: list[str] | None = None


class _Family(BaseModel):
    backend: str
    compute_capabilities: list[int] = []
    names: list[str] = []


class GuidanceManifest(BaseModel):
    comment: str = ""
    families: dict[str, _Family]
    documents: list[GuidanceDoc]


class RenderedPrompt(BaseModel):
    """A rendered prompt and what went into it."""

    model_config = ConfigDict(frozen=True)

    system: str
    user: str
    guidance_ids: list[str]
    architecture_family: str | None
    exclusions_shown: int
    exclusions_omitted: int
    measured_omitted: int
    prior_best_omitted: int
    nearest_omitted: int = 0

    def messages(self) -> list[dict[str, str]]:
        return [{"role": "system", "content": self.system}, {"role": "user", "content": self.user}]

    @property
    def text(self) -> str:
        """The prompt as one document (prompt.md for agents)."""
        return f"{self.system}\n\n{self.user}"

    @property
    def prompt_hash(self) -> str:
        return digest_json(self.messages())


def estimate_tokens(text: str) -> int:
    """Estimated tokens of a text: ceil(len / 4)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


@lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


@lru_cache(maxsize=1)
def guidance_manifest() -> GuidanceManifest:
    """guidance/manifest.json, parsed once."""
    return GuidanceManifest.model_validate_json((GUIDANCE_DIR / "manifest.json").read_text())


_SM = re.compile(r"^(?:sm|compute)_?(\d+)[a-z]?$")
_CC = re.compile(r"^(\d+)\.(\d+)$")


def _compute_capability(name: str) -> int | None:
    n = name.strip().lower()
    if m := _SM.match(n):
        return int(m.group(1))
    if m := _CC.match(n):
        return int(m.group(1)) * 10 + int(m.group(2))
    if n.isdigit():
        return int(n)
    return None


def architecture_family(backend: str, *names: str | None) -> str | None:
    """The manifest family ("hopper", "blackwell", ...) of the first name that maps to one.

    Names may be an architecture ("sm_90a", "9.0", "100"), a family name, or a device name
    ("NVIDIA H200"): the first one that identifies a family of this backend wins.
    """
    families = {k: f for k, f in guidance_manifest().families.items() if f.backend == backend}
    for raw in names:
        if not raw:
            continue
        cc = _compute_capability(raw)
        for fam_name, fam in families.items():
            if cc is not None and cc in fam.compute_capabilities:
                return fam_name
        words = set(re.split(r"[^a-z0-9]+", raw.lower()))
        for fam_name, fam in families.items():
            if words & set(fam.names):
                return fam_name
    return None


def select_guidance(backend: str, family: str | None) -> list[GuidanceDoc]:
    """The built-in guidance documents for a backend and architecture family, in manifest order."""
    return [
        d
        for d in guidance_manifest().documents
        if backend in d.backends
        and (d.families is None or (family is not None and family in d.families))
    ]


def guidance_text(doc: GuidanceDoc) -> str:
    return (GUIDANCE_DIR / doc.file).read_text()


# ---- the lists that grow with history ------------------------------------------------------

_OUTCOME_ORDER = [Outcome.FAILED, Outcome.REJECTED, Outcome.DUPLICATE, Outcome.PROMOTED]


@dataclass
class _ExclusionEntry:
    signature: str
    outcome: str
    hypothesis: str
    reasons: list[str] = field(default_factory=list)
    occurrences: int = 0
    first_seen: int = 0


def _group_exclusions(exclusions: list[Exclusion]) -> list[_ExclusionEntry]:
    """Merge exclusions with the same (outcome, signature): occurrences add, reasons dedupe."""
    merged: dict[tuple[str, str], _ExclusionEntry] = {}
    for i, ex in enumerate(exclusions):
        key = (ex.outcome, ex.signature.strip() or ex.hypothesis.strip())
        entry = merged.get(key)
        if entry is None:
            entry = merged[key] = _ExclusionEntry(
                signature=key[1], outcome=ex.outcome, hypothesis=ex.hypothesis.strip(), first_seen=i
            )
        entry.occurrences += ex.occurrences
        reason = ex.reason.strip()
        if reason and reason not in entry.reasons:
            entry.reasons.append(reason)
        if not entry.hypothesis and ex.hypothesis.strip():
            entry.hypothesis = ex.hypothesis.strip()
    # the most often repeated mistakes are the most useful to show
    return sorted(merged.values(), key=lambda e: (-e.occurrences, e.first_seen))


def _fit(lines: list[str], budget_tokens: int) -> tuple[list[int], int]:
    """Indices of the lines that fit the budget, in order of priority, and how many did not."""
    kept: list[int] = []
    used = 0
    for i, line in enumerate(lines):
        cost = estimate_tokens(line)
        if used + cost > budget_tokens:
            continue  # a shorter line further down may still fit
        kept.append(i)
        used += cost
    return kept, len(lines) - len(kept)


def _outcome_rank(outcome: str) -> int:
    return (
        _OUTCOME_ORDER.index(Outcome(outcome))
        if outcome in set(_OUTCOME_ORDER)
        else len(_OUTCOME_ORDER)
    )


def _dedupe_measured(items: list[MeasuredCandidate]) -> list[MeasuredCandidate]:
    seen: set[str] = set()
    out = []
    for m in items:
        if m.source_hash in seen:
            continue
        seen.add(m.source_hash)
        out.append(m)
    return out


# ---- rendering -----------------------------------------------------------------------------


def _case_rows(ctx: ProviderContext) -> list[dict[str, Any]]:
    baseline = {c.case_id: c for c in ctx.baseline_per_case}
    best = {c.case_id: c for c in ctx.best_per_case}
    rows = []
    for case in ctx.cases:
        b, i = baseline.get(case.case_id), best.get(case.case_id)
        achieved = None
        if i is not None and i.bytes_moved and i.median_us > 0:
            achieved = i.bytes_moved / (i.median_us * 1e-6)
        rows.append(
            {
                "case": case,
                "parameters": json.dumps(case.parameters, sort_keys=True),
                "baseline": b,
                "best": i,
                "speedup": (b.median_us / i.median_us) if (b and i and i.median_us > 0) else None,
                "achieved_bytes_per_s": achieved,
                "fraction_of_peak_bandwidth": (
                    achieved / ctx.peak_bandwidth_bytes_per_s
                    if achieved and ctx.peak_bandwidth_bytes_per_s
                    else None
                ),
            }
        )
    return rows


def render_prompt(
    ctx: ProviderContext, mode: PromptMode, budget: PromptBudget | None = None
) -> RenderedPrompt:
    """Render the system and user prompt for one proposal."""
    budget = budget or PromptBudget()
    env = _env()
    items: Any = env.get_template("items.md.j2").module  # the macros of items.md.j2

    family = architecture_family(
        ctx.target.backend,
        ctx.target.architecture,
        ctx.device.architecture,
        ctx.target.device,
        ctx.device.kind,
    )
    docs = select_guidance(ctx.target.backend, family)

    exclusions = _group_exclusions(ctx.exclusions)
    ex_lines = [str(items.exclusion(e)).strip() for e in exclusions]
    ex_kept, ex_omitted = _fit(ex_lines, budget.exclusions_tokens)
    by_outcome: dict[str, list[str]] = {}
    for i in sorted(ex_kept, key=lambda i: (_outcome_rank(exclusions[i].outcome), i)):
        by_outcome.setdefault(exclusions[i].outcome, []).append(ex_lines[i])

    measured = _dedupe_measured(ctx.measured)
    m_lines = [str(items.measured(m, ctx.run_id)).strip() for m in measured]
    m_kept, m_omitted = _fit(m_lines, budget.measured_tokens)

    prior = _dedupe_measured(ctx.prior_best)
    p_lines = [str(items.prior(m)).strip() for m in prior]
    p_kept, p_omitted = _fit(p_lines, budget.prior_best_tokens)

    n_lines = [str(items.nearest(n)).strip() for n in ctx.nearest]
    n_kept, n_omitted = _fit(n_lines, budget.nearest_tokens)

    values = {
        "ctx": ctx,
        "mode": mode.value,
        "family": family,
        "cases": _case_rows(ctx),
        "guidance": [{"doc": d, "text": guidance_text(d).strip()} for d in docs],
        "exclusion_groups": [(o, by_outcome[o]) for o in by_outcome],
        "exclusions_omitted": ex_omitted,
        "measured_lines": [m_lines[i] for i in sorted(m_kept)],
        "measured_omitted": m_omitted,
        "prior_lines": [p_lines[i] for i in sorted(p_kept)],
        "prior_omitted": p_omitted,
        "nearest_lines": [n_lines[i] for i in sorted(n_kept)],
        "nearest_omitted": n_omitted,
        "hypothesis_kinds": [
            k.value for k in HypothesisKind if k is not HypothesisKind.UNSPECIFIED
        ],
    }
    system = env.get_template("system.md.j2").render(**values).strip()
    user_template = "llm_user.md.j2" if mode is PromptMode.LLM else "command_user.md.j2"
    user = env.get_template(user_template).render(**values).strip() + "\n"
    return RenderedPrompt(
        system=system,
        user=user,
        guidance_ids=[d.id for d in docs],
        architecture_family=family,
        exclusions_shown=len(ex_kept),
        exclusions_omitted=ex_omitted,
        measured_omitted=m_omitted,
        prior_best_omitted=p_omitted,
        nearest_omitted=n_omitted,
    )


def render_retry(error: str) -> str:
    """The message that feeds a parse error back to the model."""
    return _env().get_template("llm_retry.md.j2").render(error=error).strip()
