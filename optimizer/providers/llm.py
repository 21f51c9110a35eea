"""`--provider llm`: any model litellm reaches (hosted APIs, or a local OpenAI-compatible server
through `api_base`).

Invariants:
- litellm is imported lazily, inside the call; importing this module costs nothing. litellm
  reads LITELLM_LOCAL_MODEL_COST_MAP when it is first imported; this module never sets it (the
  CLI or the user does).
- Every request is one ModelExchanged event handed to `record` (prompt, reply, model, tokens,
  cost, latency, error, attempt), including failed and malformed ones.
- API keys come from the environment (litellm reads them); they are never passed in, and every
  recorded text goes through `redact`.
- A reply is parsed strictly (optimizer.providers.prompts.reply); a malformed reply is retried, with the
  parse error fed back, up to `max_attempts` requests per proposal. A transport or server error
  is not retried here: it raises ProviderError, which the loop records as a retryable failure.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from optimizer.providers.base import (
    Proposal,
    ProviderContext,
    ProviderError,
    Recorder,
    SearchExhausted,
)
from optimizer.providers.prompts.render import PromptBudget, PromptMode, render_prompt, render_retry
from optimizer.providers.prompts.reply import (
    CandidateReply,
    ExhaustedReply,
    ReplyParseError,
    parse_reply,
    reply_json_schema,
)
from optimizer.providers.support import parse_options, redact
from tlxstore.errors import ConfigError
from tlxstore.events import ModelExchanged, new_event_id
from tlxstore.hashing import canonical_json


class LlmOptions(BaseModel):
    """Options of the llm provider. Unknown keys (other providers' options) are ignored."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    model: str = Field(min_length=1)
    api_base: str | None = None
    max_attempts: int = Field(
        3, ge=1
    )  # requests per proposal, counting retries of malformed replies
    request_timeout_s: float = Field(600.0, gt=0)
    temperature: float | None = None
    structured_output: bool | None = None  # None: ask litellm whether the model supports it
    mock_response: str | None = None  # litellm answers with this text, without any network
    budget: PromptBudget = Field(default_factory=PromptBudget)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip()


def _sum(values: Sequence[int | float | None]) -> Any:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


class LlmProvider:
    name = "llm"

    def __init__(self, options: LlmOptions) -> None:
        self.options = options
        self.model: str | None = options.model

    # ---- one request --------------------------------------------------------------------
    def _litellm(self) -> Any:
        import litellm  # lazy: slow to import, optional extra

        litellm.suppress_debug_info = True  # no banners on stdout from inside the library
        return litellm

    def _wants_structured_output(self, litellm: Any) -> bool:
        if self.options.structured_output is not None:
            return self.options.structured_output
        try:
            return bool(litellm.supports_response_schema(model=self.options.model))
        except Exception:  # litellm raises assorted errors for models it has not mapped
            return False

    def _complete(self, messages: list[dict[str, str]]) -> Any:
        litellm = self._litellm()
        kwargs: dict[str, Any] = {
            "model": self.options.model,
            "messages": messages,
            "timeout": self.options.request_timeout_s,
            "num_retries": 0,  # retries are ours: every request must become an event
            "max_retries": 0,
        }
        if self.options.api_base:
            kwargs["api_base"] = self.options.api_base
        if self.options.temperature is not None:
            kwargs["temperature"] = self.options.temperature
        if self.options.mock_response is not None:
            kwargs["mock_response"] = self.options.mock_response
        if self._wants_structured_output(litellm):
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "tlxdb_reply", "schema": reply_json_schema()},
            }
        return litellm.completion(**kwargs)

    def _cost_usd(self, response: Any) -> float | None:
        try:
            return float(self._litellm().completion_cost(completion_response=response))
        except Exception:  # unknown model or price: unknown cost is None, never 0
            return None

    # ---- the proposal -------------------------------------------------------------------
    def _exchange(
        self, messages: list[dict[str, str]], attempt: int, parent_source: str
    ) -> tuple[ModelExchanged, CandidateReply | ExhaustedReply | None, str]:
        """One request: its event, the parsed reply (None when refused) and the raw reply text.

        Raises _RequestFailed (carrying the event) when the request itself failed."""
        exchange_id, sent = new_event_id(), canonical_json(messages)

        def event(**fields: Any) -> ModelExchanged:
            return ModelExchanged(
                exchange_id=exchange_id,
                provider=self.name,
                model=self.model,
                prompt=sent,
                attempt=attempt,
                **fields,
            )

        started = time.monotonic()
        try:
            response = self._complete(messages)
        except Exception as exc:  # litellm maps every provider failure to its own types
            failure = redact(_one_line(exc))
            latency_ms = (time.monotonic() - started) * 1e3
            raise _RequestFailed(event(reply=None, error=failure, latency_ms=latency_ms)) from None
        latency_ms = (time.monotonic() - started) * 1e3
        text = response.choices[0].message.content or ""
        usage = getattr(response, "usage", None)
        reply: CandidateReply | ExhaustedReply | None = None
        error: str | None = None
        try:
            reply = parse_reply(text, parent_source)
        except ReplyParseError as exc:
            error = exc.message
        exchanged = event(
            reply=redact(text),
            error=error,
            tokens_in=getattr(usage, "prompt_tokens", None),
            tokens_out=getattr(usage, "completion_tokens", None),
            cost_usd=self._cost_usd(response),
            latency_ms=latency_ms,
        )
        return exchanged, reply, text

    def propose(self, ctx: ProviderContext, record: Recorder) -> Proposal | SearchExhausted:
        """Ask the model for one candidate derived from ctx.parent_source."""
        prompt = render_prompt(ctx, PromptMode.LLM, self.options.budget)
        messages = prompt.messages()
        spent: list[ModelExchanged] = []
        for attempt in range(1, self.options.max_attempts + 1):
            try:
                exchanged, reply, text = self._exchange(messages, attempt, ctx.parent_source)
            except _RequestFailed as failed:
                record(failed.event)
                raise ProviderError(f"model {self.model} failed: {failed.event.error}") from None
            record(exchanged)
            spent.append(exchanged)
            if isinstance(reply, ExhaustedReply):
                return SearchExhausted(reason=f"model {self.model}: {reply.reason}")
            if isinstance(reply, CandidateReply):
                return Proposal(
                    source=reply.source,
                    hypothesis=reply.hypothesis,
                    evidence=reply.evidence,
                    change=reply.change,
                    expected_effect=reply.expected_effect,
                    risk=reply.risk,
                    hypothesis_kind=reply.hypothesis_kind.value,
                    commit_title=reply.commit_title,
                    commit_summary=reply.commit_summary,
                    prompt_hash=prompt.prompt_hash,
                    exchange_id=exchanged.exchange_id,
                    tokens_in=_sum([e.tokens_in for e in spent]),
                    tokens_out=_sum([e.tokens_out for e in spent]),
                    cost_usd=_sum([e.cost_usd for e in spent]),
                )
            messages = [
                *messages,
                {"role": "assistant", "content": text},
                {"role": "user", "content": render_retry(exchanged.error or "")},
            ]
        raise ProviderError(
            f"model {self.model} gave no valid reply in {self.options.max_attempts} attempts: "
            f"{spent[-1].error if spent else ''}"
        )


class _RequestFailed(Exception):
    def __init__(self, event: ModelExchanged) -> None:
        super().__init__(event.error)
        self.event = event


def create(options: Any) -> LlmProvider:
    """The llm provider from ProviderOptions or a mapping (keys: model, api_base and the optional LlmOptions fields)."""
    if importlib.util.find_spec("litellm") is None:  # found without importing it (slow)
        raise ConfigError(
            "--provider llm needs litellm, an optional extra: pip install 'tlxdb[llm]'"
        )
    return LlmProvider(
        parse_options(
            LlmOptions, options, "llm", {"model": "--model NAME", "api_base": "--api-base URL"}
        )
    )
