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
        match=r"^unknown provider 'x'; choose one of: command, llm, remeasure, tune$",
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


def test_the_former_name_replay_creates_the_remeasure_provider(tmp_path):
    """`replay` and `replay_run` (a run_request.json written before the rename, read by --resume)
    still make the provider now called remeasure; the names offered are the new ones."""
    opts = ProviderOptions.model_validate({"replay_run": "r1", "store": tmp_path / "s.duckdb"})
    assert opts.remeasure_run == "r1"
    old = ProviderRegistry().create("replay", opts.model_copy(update={"remeasure_run": None}))
    assert old.name == "remeasure"
    assert "replay" not in ProviderRegistry().names()
