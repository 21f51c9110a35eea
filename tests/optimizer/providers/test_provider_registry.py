"""Providers by name: built-ins load lazily, a missing one breaks nothing else, plugins register."""

import pytest
from support.scripted_provider import ScriptedProvider

from optimizer.providers import (
    ProviderOptions,
    ProviderRegistry,
    ProviderUnavailableError,
    UnknownProviderError,
    default_provider,
)


def test_a_missing_provider_module_is_named_and_does_not_break_the_others():
    reg = ProviderRegistry(
        {"ghost": "optimizer.providers.no_such_module", "tune": "optimizer.providers.tune"}
    )
    with pytest.raises(
        ProviderUnavailableError, match=r"^provider 'ghost' is not available: No module named"
    ):
        reg.create("ghost", ProviderOptions())
    assert reg.create("tune", ProviderOptions()).name == "tune"


def test_an_unknown_name_lists_the_choices():
    with pytest.raises(
        UnknownProviderError,
        match=r"^unknown provider 'x'; choose one of: command, llm, replay, tune$",
    ):
        ProviderRegistry().create("x", ProviderOptions())


def test_a_registered_factory_is_used_and_can_be_removed():
    reg = ProviderRegistry()
    reg.register("scripted", lambda options: ScriptedProvider([]))
    assert reg.create("scripted", ProviderOptions()).name == "scripted"
    assert "scripted" in reg.names()
    reg.unregister("scripted")
    assert "scripted" not in reg.names()


def test_the_default_provider_is_tune_without_a_model():
    assert default_provider(None) == "tune" and default_provider("gpt-x") == "llm"
