"""What a bundle declares about its workloads and its target, as the rest of tlxdb sees them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class CaseSpec(_Frozen):
    """A case as cases.json gives it (parameters are handed to the harness unchanged)."""

    case_id: str
    parameters: dict[str, Any] = {}
    weight: float = 1.0
    protected: bool = True


class TargetSpec(_Frozen):
    backend: Literal["cuda", "hip", "cpu"]
    architecture: str = ""
    device: str = ""
    optimization_guidance: str = ""
    tuning_space: dict[str, list[Any]] | None = None  # tlxdb's own optional key, see docs
