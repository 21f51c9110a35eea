"""Every TLXDB_* environment variable, declared once and typed.

Library code reads settings through `settings()`; nothing else reads os.environ for TLXDB_*
and nothing in the library mutates os.environ.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field


def _default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "tlxdb"


class Settings(BaseModel):
    """tlxdb's environment, read once per call of `settings()`."""

    model_config = ConfigDict(frozen=True)

    store: Path = Field(description="TLXDB_STORE: the DuckDB evidence store file.")
    lock_timeout_s: float = Field(
        60.0, gt=0, description="TLXDB_LOCK_TIMEOUT_S: how long to wait for the store lock."
    )
    child_python: str | None = Field(
        None, description="TLXDB_CHILD_PYTHON: interpreter for harness child processes."
    )


ENV_VARS = {
    "store": "TLXDB_STORE",
    "lock_timeout_s": "TLXDB_LOCK_TIMEOUT_S",
    "child_python": "TLXDB_CHILD_PYTHON",
}


def settings(environ: dict[str, str] | None = None) -> Settings:
    """Read the TLXDB_* variables from `environ` (default: the process environment)."""
    env = os.environ if environ is None else environ
    values: dict[str, object] = {"store": _default_data_dir() / "store.duckdb"}
    for field, var in ENV_VARS.items():
        if env.get(var):
            values[field] = env[var]
    return Settings.model_validate(values)
