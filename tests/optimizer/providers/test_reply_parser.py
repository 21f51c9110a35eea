"""The model reply: a tagged union parsed strictly, with one-line reasons fed back to the model."""

from __future__ import annotations

import json

import pytest
from conftest import FASTER_SOURCE, PARENT_SOURCE

from optimizer.providers.prompts.reply import (
    CandidateReply,
    ExhaustedReply,
    HypothesisKind,
    ReplyParseError,
    parse_metadata,
    parse_reply,
)


def candidate(**overrides) -> dict:
    body = {
        "kind": "candidate",
        "hypothesis": "64-element blocks leave the grid launch-bound",
        "evidence": "n65536 runs at 19.7 GB/s",
        "change": "BLOCK 64 -> 1024",
        "expected_effect": "fewer programs, 2x on n65536",
        "risk": "none",
        "hypothesis_kind": "launch_config",
        "source": FASTER_SOURCE,
    }
    body.update(overrides)
    return {"reply": body}


def test_a_well_formed_candidate_parses():
    reply = parse_reply(json.dumps(candidate()), PARENT_SOURCE)
    assert isinstance(reply, CandidateReply)
    assert reply.hypothesis_kind is HypothesisKind.LAUNCH_CONFIG and reply.source == FASTER_SOURCE


def test_one_json_fence_around_the_object_is_accepted():
    reply = parse_reply("```json\n" + json.dumps(candidate()) + "\n```", PARENT_SOURCE)
    assert isinstance(reply, CandidateReply)


def test_exhausted_is_the_other_alternative():
    reply = parse_reply(
        '{"reply": {"kind": "exhausted", "reason": "at the copy ceiling"}}', PARENT_SOURCE
    )
    assert reply == ExhaustedReply(kind="exhausted", reason="at the copy ceiling")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("Sure! Here it is: " + json.dumps(candidate()), "exactly one JSON object"),
        ('{"reply": {"kind": "candidate",', "not valid JSON"),
        (json.dumps(candidate(kind="maybe")), "does not match the schema"),
        (json.dumps(candidate(hypothesis_kind="vibes")), "reply.candidate.hypothesis_kind"),
        (json.dumps(candidate(extra_field=1)), "extra_field"),
        (
            json.dumps({"reply": {"kind": "candidate", "source": FASTER_SOURCE}}),
            "reply.candidate.hypothesis",
        ),
        (json.dumps(candidate(source="def broken(:\n")), "source is not valid Python"),
        (json.dumps(candidate(source=PARENT_SOURCE + "\n\n")), "identical to the parent"),
        (json.dumps(candidate()) + "\n" + json.dumps(candidate()), "not valid JSON"),
    ],
    ids=[
        "prose",
        "truncated",
        "unknown-kind",
        "bad-enum",
        "extra-key",
        "missing-fields",
        "syntax-error",
        "unchanged",
        "two-objects",
    ],
)
def test_malformed_replies_are_refused_with_a_one_line_reason(text, reason):
    with pytest.raises(ReplyParseError) as err:
        parse_reply(text, PARENT_SOURCE)
    assert reason in err.value.message
    assert "\n" not in err.value.message


def test_agent_metadata_is_strict_too():
    meta = parse_metadata(
        json.dumps({"hypothesis": "bigger blocks", "hypothesis_kind": "launch_config"})
    )
    assert meta.hypothesis == "bigger blocks"
    with pytest.raises(ReplyParseError, match="hypothesis"):
        parse_metadata(json.dumps({"change": "no hypothesis given"}))
    with pytest.raises(ReplyParseError, match="candidate_metadata.json is invalid"):
        parse_metadata("{not json")
