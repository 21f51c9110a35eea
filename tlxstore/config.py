"""Every TLXDB_* environment variable, declared once and typed.

Library code reads settings through `settings()`; nothing else reads os.environ for TLXDB_*
and nothing in the library mutates os.environ.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from tlxstore.errors import ConfigError

# A store named by one of these is a team store (tlxstore/team.py); anything else is a file.
TEAM_STORE_PREFIXES = ("ducklake:postgres://", "ducklake:postgresql://")


def data_dir() -> Path:
    """tlxdb's per-user data folder (the default store, team stores' local run folders)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "tlxdb"


def store_ref(text: str) -> Path | str:
    """A store reference as given: a DuckLake URL stays text, anything else is a path (a Path
    would fold the URL's `//`)."""
    return text if text.startswith("ducklake:") else Path(text).expanduser()


def _store_ref_field(value: object) -> object:
    return store_ref(value) if isinstance(value, str) else value


StoreRef = Annotated[Path | str, BeforeValidator(_store_ref_field)]  # a file's path or a team URL


class Settings(BaseModel):
    """tlxdb's environment, read once per call of `settings()`."""

    model_config = ConfigDict(frozen=True)

    store: StoreRef = Field(
        description="TLXDB_STORE: the evidence store: a DuckDB file, or a team store's URL "
        "(ducklake:postgres://...)."
    )
    lock_timeout_s: float = Field(
        60.0, gt=0, description="TLXDB_LOCK_TIMEOUT_S: how long to wait for the store lock."
    )
    child_python: str | None = Field(
        None, description="TLXDB_CHILD_PYTHON: interpreter for harness child processes."
    )
    simulated_devices: int | None = Field(
        None,
        ge=1,
        description="TLXDB_SIMULATED_DEVICES: testing only; a CPU target offers this many "
        "simulated device ids to --devices (evaluations recorded as simulated).",
    )
    nvml_trace: Path | None = Field(
        None,
        description="TLXDB_NVML_TRACE: testing only; harness children and the run's environment "
        "read NVML from this recorded trace (profilers/nvml.py), also on the CPU interpreter "
        "(machine states and the environment recorded with source 'recorded').",
    )


ENV_VARS = {
    "store": "TLXDB_STORE",
    "lock_timeout_s": "TLXDB_LOCK_TIMEOUT_S",
    "child_python": "TLXDB_CHILD_PYTHON",
    "simulated_devices": "TLXDB_SIMULATED_DEVICES",
    "nvml_trace": "TLXDB_NVML_TRACE",
}


def settings(environ: dict[str, str] | None = None) -> Settings:
    """Read the TLXDB_* variables from `environ` (default: the process environment)."""
    env = os.environ if environ is None else environ
    values: dict[str, object] = {"store": data_dir() / "store.duckdb"}
    for field, var in ENV_VARS.items():
        if env.get(var):
            values[field] = env[var]
    try:
        return Settings.model_validate(values)
    except ValidationError as e:
        err = e.errors()[0]
        var = ENV_VARS.get(str(err["loc"][0]), str(err["loc"][0]))
        raise ConfigError(f"{var}={values.get(str(err['loc'][0]))!s}: {err['msg']}") from None


class ObjectStorage(BaseModel):
    """Where a team store's S3 credentials and endpoint come from: the variables every AWS tool
    reads (the keys never go into a store URL, which is written into run folders)."""

    model_config = ConfigDict(frozen=True)

    key_id: str | None = Field(None, description="AWS_ACCESS_KEY_ID")
    secret: str | None = Field(None, description="AWS_SECRET_ACCESS_KEY")
    session_token: str | None = Field(None, description="AWS_SESSION_TOKEN")
    region: str | None = Field(None, description="AWS_REGION, else AWS_DEFAULT_REGION")
    endpoint_url: str | None = Field(
        None, description="AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL (an S3-compatible server)"
    )


def object_storage(environ: dict[str, str] | None = None) -> ObjectStorage:
    """Read the AWS_* variables a team store with s3:// data uses."""
    env = os.environ if environ is None else environ
    return ObjectStorage(
        key_id=env.get("AWS_ACCESS_KEY_ID") or None,
        secret=env.get("AWS_SECRET_ACCESS_KEY") or None,
        session_token=env.get("AWS_SESSION_TOKEN") or None,
        region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or None,
        endpoint_url=env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or None,
    )
