"""Driving real runs through the library API in tests."""
# CPU timings of the interpreter on a shared 2-core machine are noisy: CV bounds are loose here.

from __future__ import annotations

from pathlib import Path

from optimizer.bundle.loading import locate
from optimizer.run import lifecycle
from support.bundles import kernel_copy, vecadd_bundle

FAST = {"benchmark_repetitions": 8, "max_cv": 5.0, "max_candidate_seconds": 60}


def request(
    tmp: Path,
    *,
    bundle: Path | None = None,
    kernel: Path | None = None,
    flags: dict | None = None,
    **kw,
) -> lifecycle.RunRequest:
    bundle = bundle or vecadd_bundle(tmp / "bundle")
    kernel = kernel or kernel_copy(tmp / "src")
    return lifecycle.RunRequest(
        kernel=kernel,
        bundle=locate(bundle),
        store=kw.pop("store", tmp / "store.duckdb"),
        output_dir=kw.pop("output_dir", tmp / "out"),
        flags={**FAST, **(flags or {})},
        commit=lifecycle.CommitOptions(enabled=False),
        **kw,
    )
