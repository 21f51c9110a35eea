"""The compatibility suite: bundles written here in each shape the TLX agent accepts, each run
through the real CLI against real stores in tmp_path, on the Triton interpreter. Tests copy a
bundle and a kernel into tmp_path and change at most one thing (compat_cli.py)."""

from __future__ import annotations

import pytest
from support.scripted_provider import ScriptedProvider, set_block

from optimizer.providers import registry


@pytest.fixture
def wider_blocks():
    """A `scripted` provider (through the real registry) that proposes BLOCK_SIZE 256."""
    registry.register("scripted", lambda options: ScriptedProvider([set_block(256)]))
    yield "scripted"
    registry.unregister("scripted")
