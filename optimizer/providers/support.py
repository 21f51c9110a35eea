"""What the model-driven providers (llm, command, remeasure) share.

- `redact`: API keys come from the environment and must never enter events, logs or files.
  Every text these providers record (errors, replies, agent output) passes through it.
- `parse_options`: each provider's typed options from whatever the registry hands `create()`
  (optimizer.providers.ProviderOptions, another pydantic model, or a mapping).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from tlxstore.errors import ConfigError

OptionsT = TypeVar("OptionsT", bound=BaseModel)

# Environment variables whose values are treated as secrets.
_SECRET_NAME = re.compile(r"(API_?KEY|_KEY|TOKEN|SECRET|PASSWORD|CREDENTIALS?)$", re.IGNORECASE)
_MIN_SECRET_CHARS = 8  # shorter values ("1", "true") are not secrets and would redact noise
REDACTED = "[redacted]"


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of secret-looking environment variables, longest first."""
    env = os.environ if environ is None else environ
    values = {v for k, v in env.items() if _SECRET_NAME.search(k) and len(v) >= _MIN_SECRET_CHARS}
    return sorted(values, key=len, reverse=True)


def redact(
    text: str, extra: list[str] | None = None, environ: Mapping[str, str] | None = None
) -> str:
    """`text` with every secret value (and every string in `extra`) replaced by [redacted]."""
    for secret in [*(extra or []), *secret_values(environ)]:
        if secret:
            text = text.replace(secret, REDACTED)
    return text


def parse_options(
    cls: type[OptionsT], options: Any, provider: str, flags: Mapping[str, str]
) -> OptionsT:
    """Validate `options` into `cls`; a missing or bad option is a ConfigError naming its flag."""
    if isinstance(options, cls):
        return options
    values = options.model_dump() if isinstance(options, BaseModel) else dict(options)
    try:
        return cls.model_validate({k: v for k, v in values.items() if v is not None})
    except ValidationError as e:
        first = e.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else ""
        flag = flags.get(field, field)
        if first["type"] == "missing":
            raise ConfigError(f"--provider {provider} needs {flag}") from None
        raise ConfigError(f"--provider {provider}: {flag}: {first['msg']}") from None
