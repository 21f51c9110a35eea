"""The run layer, not the CLI, knows which settings a resumed run keeps from its start record."""

from __future__ import annotations

from pathlib import Path

import pytest

from optimizer.run import lifecycle
from tlxstore.errors import ConfigError


def test_resume_refuses_settings_it_would_ignore_before_touching_the_store(tmp_path):
    store = tmp_path / "s.duckdb"
    given = {"kernel": Path("k.py"), "prior_run": ("r0",), "max_cv": 0.2, "label": "kept"}
    with pytest.raises(ConfigError) as e:
        lifecycle.resume("r1", store, given=given)
    assert e.value.message == (
        "--resume continues with the run's own settings; drop --kernel, --prior-run, --max-cv"
    )
    assert not store.exists()


def test_settings_left_unset_are_no_clash():
    lifecycle.refuse_resume_overrides({"kernel": None, "prior_run": (), "max_rounds": None})
