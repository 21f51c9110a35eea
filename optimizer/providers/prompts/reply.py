"""What a model (or an agent) answers, as typed data, and the strict parser for it.

The model answers with one JSON object `{"reply": {...}}` whose inner object is a tagged union
on `kind`: a candidate (complete new source plus its hypothesis) or "exhausted" (nothing
promising left). The parser accepts exactly that object, optionally inside one ```json fence,
and nothing else: no prose around it, no unknown keys, a source that parses as Python and that
differs from the parent.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from optimizer import pysource
from tlxstore.errors import TlxdbError
from tlxstore.events import HypothesisKind


class ReplyParseError(TlxdbError):
    """The model's reply is not a valid proposal."""


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CandidateReply(_Strict):
    kind: Literal["candidate"]
    hypothesis: str = Field(min_length=1)
    evidence: str = Field(min_length=1)
    change: str = Field(min_length=1)
    expected_effect: str = Field(min_length=1)
    risk: str = ""
    hypothesis_kind: HypothesisKind
    commit_title: str | None = None
    commit_summary: str | None = None
    source: str = Field(min_length=1)


class ExhaustedReply(_Strict):
    kind: Literal["exhausted"]
    reason: str = Field(min_length=1)


ReplyBody = Annotated[CandidateReply | ExhaustedReply, Field(discriminator="kind")]


class ModelReply(_Strict):
    """The whole JSON object a model answers with."""

    reply: ReplyBody


class CandidateMetadata(_Strict):
    """candidate_metadata.json, as an external agent may write it beside candidate.py."""

    hypothesis: str = Field(min_length=1)
    evidence: str = ""
    change: str = ""
    expected_effect: str = ""
    risk: str = ""
    hypothesis_kind: HypothesisKind = HypothesisKind.OTHER
    commit_title: str | None = None
    commit_summary: str | None = None


_ADAPTER: TypeAdapter[ModelReply] = TypeAdapter(ModelReply)
_FENCE = re.compile(r"\A```(?:json)?[ \t]*\n(?P<body>.*)\n```\Z", re.DOTALL)
_MAX_ERRORS_REPORTED = 5  # validation errors fed back per reply; more only repeat the first


def reply_json_schema() -> dict:
    """The JSON schema of ModelReply (sent as structured-output format where supported)."""
    return ModelReply.model_json_schema()


def _validation_message(err: ValidationError) -> str:
    parts = []
    for e in err.errors()[:_MAX_ERRORS_REPORTED]:
        where = ".".join(str(p) for p in e["loc"]) or "(top level)"
        parts.append(f"{where}: {e['msg']}")
    more = err.error_count() - len(parts)
    if more > 0:
        parts.append(f"and {more} more")
    return "; ".join(parts)


def check_source(source: str, parent_source: str) -> None:
    """A proposed source must be complete Python and must change the parent."""
    try:
        pysource.parse(source)
    except SyntaxError as e:
        raise ReplyParseError(f"source is not valid Python: {e.msg} at line {e.lineno}") from None
    if source.strip() == parent_source.strip():
        raise ReplyParseError("source is identical to the parent; propose a change")


def parse_reply(text: str, parent_source: str) -> CandidateReply | ExhaustedReply:
    """Parse a model's reply strictly; raise ReplyParseError with a one-line reason."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group("body").strip()
    if not body.startswith("{"):
        raise ReplyParseError(
            "reply must be exactly one JSON object (optionally in one ```json fence)"
        )
    try:
        obj = json.loads(body)
    except json.JSONDecodeError as e:
        raise ReplyParseError(
            f"reply is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}"
        ) from None
    try:
        reply = _ADAPTER.validate_python(obj).reply
    except ValidationError as e:
        raise ReplyParseError(
            f"reply does not match the schema: {_validation_message(e)}"
        ) from None
    if isinstance(reply, CandidateReply):
        check_source(reply.source, parent_source)
    return reply


def parse_metadata(text: str) -> CandidateMetadata:
    """Parse candidate_metadata.json strictly; raise ReplyParseError with a one-line reason."""
    try:
        return CandidateMetadata.model_validate_json(text)
    except ValidationError as e:
        raise ReplyParseError(
            f"candidate_metadata.json is invalid: {_validation_message(e)}"
        ) from None
