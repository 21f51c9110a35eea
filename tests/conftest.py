"""Shared fixtures. Tests run real kernels on the Triton interpreter and use no network."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"

# litellm must never try to download its price map in tests (no network here).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    """A fresh store file location (not yet created)."""
    return tmp_path / "store.duckdb"


@pytest.fixture(autouse=True)
def _isolated_store_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No test ever touches the user's default store."""
    monkeypatch.setenv("TLXDB_STORE", str(tmp_path / "default-store.duckdb"))


def copy_example(name: str, target: str, dest: Path) -> Path:
    """Copy examples/<name>/<target> to dest and return the copy (tests never edit examples)."""
    src = EXAMPLES / name / target
    shutil.copytree(src, dest)
    return dest


# The team store's servers (PostgreSQL, moto's S3), started once per session by the tests that use them.
from support.servers import postgres, s3_server  # noqa: E402, F401
