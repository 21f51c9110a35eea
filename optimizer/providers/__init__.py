"""Providers by name: a registry of factories, built-ins resolved by lazy import.

Each built-in provider module (optimizer/providers/<name>.py) exposes
`create(options: ProviderOptions) -> Provider`. A module is imported only when its provider is
asked for, so one that is missing or broken never breaks the others. Nothing is registered at
import time; `ProviderRegistry.register` adds a factory explicitly (plugins, tests).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from optimizer.providers.base import Provider
from tlxstore.config import StoreRef
from tlxstore.errors import ConfigError

BUILTIN: dict[str, str] = {
    "tune": "optimizer.providers.tune",
    "llm": "optimizer.providers.llm",
    "command": "optimizer.providers.command",
    "remeasure": "optimizer.providers.remeasure",
}
RENAMED: dict[str, str] = {"replay": "remeasure"}
"""Providers' former names, still accepted: "replay" re-measured history, a word that now means
only re-deciding a run from its events (`tlxdb replay`)."""


class ProviderOptions(BaseModel):
    """What `tlxdb optimize` knows that a provider may need."""

    model_config = ConfigDict(frozen=True)

    model: str | None = None  # --model
    api_base: str | None = None  # an OpenAI-compatible server for --provider llm
    command: str | None = None  # --provider-command
    # --remeasure-run (a run id, already resolved in the store); `replay_run` in a run request
    # written before the rename
    remeasure_run: str | None = Field(
        default=None, validation_alias=AliasChoices("remeasure_run", "replay_run")
    )
    store: StoreRef | None = None  # the evidence store (a path or a team store's URL)
    workspace: Path | None = None  # the run's private workspace (candidates/<id>/ for agents)
    kernel_path: Path | None = None


Factory = Callable[[ProviderOptions], Provider]


class UnknownProviderError(ConfigError):
    """No provider of that name."""


class ProviderUnavailableError(ConfigError):
    """The provider cannot be loaded."""


class ProviderRegistry:
    def __init__(self, builtin: dict[str, str] | None = None) -> None:
        self._builtin = dict(BUILTIN if builtin is None else builtin)
        self._factories: dict[str, Factory] = {}

    def register(self, name: str, factory: Factory) -> None:
        self._factories[name] = factory

    def unregister(self, name: str) -> None:
        self._factories.pop(name, None)

    def names(self) -> list[str]:
        return sorted(set(self._builtin) | set(self._factories))

    def create(self, name: str, options: ProviderOptions) -> Provider:
        name = RENAMED.get(name, name) if name not in self._factories else name
        if name in self._factories:
            return self._factories[name](options)
        module_name = self._builtin.get(name)
        if module_name is None:
            raise UnknownProviderError(
                f"unknown provider {name!r}; choose one of: {', '.join(self.names())}"
            )
        try:
            module = importlib.import_module(module_name)
        except ImportError as e:
            raise ProviderUnavailableError(f"provider {name!r} is not available: {e}") from None
        create = getattr(module, "create", None)
        if create is None:
            raise ProviderUnavailableError(
                f"provider {name!r} is not available: {module_name} has no create()"
            )
        return create(options)


registry = ProviderRegistry()


def default_provider(model: str | None) -> str:
    """`tune` when no model is given, else `llm`."""
    return "llm" if model else "tune"
