"""The llm provider through litellm: a real OpenAI-compatible server on 127.0.0.1, and litellm's
mock_response. Every request is a recorded ModelExchanged; keys never enter it."""

from __future__ import annotations

import json

import pytest
from conftest import FASTER_SOURCE, PARENT_SOURCE
from test_reply_parser import candidate

from optimizer.providers import ProviderOptions
from optimizer.providers.base import Proposal, ProviderError, SearchExhausted
from optimizer.providers.llm import LlmOptions, LlmProvider, create
from tlxstore.errors import ConfigError
from tlxstore.events import ModelExchanged

SECRET = "sk-test-0123456789abcdef"


@pytest.fixture(autouse=True)
def _api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)


def local(server, **kw) -> LlmProvider:
    return LlmProvider(LlmOptions(model="openai/local-model", api_base=server.api_base, **kw))


def test_a_good_reply_becomes_a_proposal_with_its_exchange_recorded(openai_server, context):
    openai_server.enqueue(json.dumps(candidate()), prompt_tokens=900, completion_tokens=300)
    events: list[ModelExchanged] = []
    proposal = local(openai_server).propose(context, events.append)

    assert isinstance(proposal, Proposal)
    assert proposal.source == FASTER_SOURCE and proposal.hypothesis_kind == "launch_config"
    assert (proposal.tokens_in, proposal.tokens_out) == (900, 300)
    [ex] = events
    assert ex.exchange_id == proposal.exchange_id and ex.attempt == 1 and ex.error is None
    assert ex.model == "openai/local-model" and ex.provider == "llm"
    assert ex.reply == json.dumps(candidate()) and ex.latency_ms > 0
    assert ex.cost_usd is None  # an unpriced local model: unknown, not 0
    # the whole prompt went to the server and into the event
    [request] = openai_server.requests
    assert request["messages"][1]["content"].count(PARENT_SOURCE.rstrip()) == 1
    assert json.loads(ex.prompt) == request["messages"]
    assert proposal.prompt_hash and proposal.prompt_hash.startswith("sha256:")


def test_a_malformed_reply_is_retried_with_the_parse_error_fed_back(openai_server, context):
    openai_server.enqueue(
        "I think BLOCK=1024 would be faster.", prompt_tokens=900, completion_tokens=10
    )
    openai_server.enqueue(json.dumps(candidate()), prompt_tokens=950, completion_tokens=300)
    events: list[ModelExchanged] = []
    proposal = local(openai_server).propose(context, events.append)

    assert isinstance(proposal, Proposal) and proposal.source == FASTER_SOURCE
    assert [e.attempt for e in events] == [1, 2]
    assert "exactly one JSON object" in (events[0].error or "") and events[1].error is None
    assert proposal.exchange_id == events[1].exchange_id
    assert (proposal.tokens_in, proposal.tokens_out) == (1850, 310)  # the proposal paid for both
    retry = openai_server.requests[1]["messages"]
    assert retry[2] == {"role": "assistant", "content": "I think BLOCK=1024 would be faster."}
    assert "exactly one JSON object" in retry[3]["content"]


def test_replies_that_stay_malformed_fail_after_the_bounded_attempts(openai_server, context):
    for _ in range(2):
        openai_server.enqueue(json.dumps(candidate(source=PARENT_SOURCE)))
    events: list[ModelExchanged] = []
    with pytest.raises(ProviderError, match="no valid reply in 2 attempts: source is identical"):
        local(openai_server, max_attempts=2).propose(context, events.append)
    assert len(openai_server.requests) == 2 and [e.attempt for e in events] == [1, 2]


def test_a_server_error_is_a_provider_error_and_is_recorded_without_the_key(openai_server, context):
    openai_server.enqueue_error(500, f"upstream exploded (key {SECRET})")
    events: list[ModelExchanged] = []
    with pytest.raises(ProviderError) as err:
        local(openai_server).propose(context, events.append)
    assert len(openai_server.requests) == 1  # not retried behind our back
    [ex] = events
    assert ex.reply is None and ex.error is not None and "InternalServerError" in ex.error
    assert SECRET not in err.value.message and SECRET not in ex.model_dump_json()
    assert "[redacted]" in ex.error
    # the key did reach the server, as it must
    headers = {k.lower(): v for k, v in openai_server.headers[0].items()}
    assert headers["authorization"] == f"Bearer {SECRET}"


def test_the_model_may_declare_the_search_exhausted(openai_server, context):
    openai_server.enqueue(
        '{"reply": {"kind": "exhausted", "reason": "at 95% of the copy ceiling"}}'
    )
    result = local(openai_server).propose(context, lambda e: None)
    assert isinstance(result, SearchExhausted) and "95% of the copy ceiling" in result.reason


def test_structured_output_is_requested_from_models_that_support_it(openai_server, context):
    openai_server.enqueue(json.dumps(candidate()))
    openai_server.enqueue(json.dumps(candidate()))
    LlmProvider(LlmOptions(model="openai/gpt-4o", api_base=openai_server.api_base)).propose(
        context, lambda e: None
    )
    local(openai_server).propose(context, lambda e: None)
    with_schema, without = openai_server.requests
    assert with_schema["response_format"]["type"] == "json_schema"
    assert with_schema["response_format"]["json_schema"]["schema"]["required"] == ["reply"]
    assert "response_format" not in without


def test_litellm_mock_response_runs_without_any_server(context):
    provider = LlmProvider(LlmOptions(model="gpt-4o", mock_response=json.dumps(candidate())))
    events: list[ModelExchanged] = []
    proposal = provider.propose(context, events.append)
    assert isinstance(proposal, Proposal) and proposal.source == FASTER_SOURCE
    assert events[0].cost_usd is not None and events[0].cost_usd > 0  # a priced model
    assert proposal.cost_usd == events[0].cost_usd


def test_create_takes_the_registry_options_and_names_the_missing_flag():
    provider = create(ProviderOptions(model="openai/x"))
    assert provider.model == "openai/x" and provider.name == "llm"
    assert (
        create({"model": "m", "api_base": "http://127.0.0.1:1/v1"}).options.api_base
        == "http://127.0.0.1:1/v1"
    )
    with pytest.raises(ConfigError, match="--provider llm needs --model NAME"):
        create(ProviderOptions())
