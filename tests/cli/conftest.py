"""Fixtures shared by the CLI tests."""

from __future__ import annotations

import pytest
from support.scripted_provider import ScriptedProvider

from optimizer.providers import registry


@pytest.fixture
def scripted():
    """Registers a `scripted` provider through the real registry for the duration of a test;
    the test appends the steps it proposes."""
    steps: list = []
    registry.register("scripted", lambda options: ScriptedProvider(list(steps)))
    yield steps
    registry.unregister("scripted")
