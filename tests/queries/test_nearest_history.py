"""The view nearest_history (issue 30): for a run, the configurations other runs promoted for the
same kernel, ranked by how near their run is (shape distance of the cases' parameters, device,
versions, an edited source); other architecture families left out unless named with
--prior-run."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

import queries
from queries import lookups
from queries.models import NearestConfig
from tlxstore.events import (
    BASELINE_ID,
    BundleValidated,
    DeviceInfo,
    Event,
    Outcome,
    RunFinished,
    RunStarted,
    StoppingReason,
    ToolVersions,
)
from tlxstore.hashing import digest_json, digest_text
from tlxstore.store import Store
from tlxstore.testing import candidate_events, decided, ingest_run, run_started

H200 = DeviceInfo(kind="NVIDIA H200", backend="cuda", architecture="sm_90")
H100 = DeviceInfo(kind="NVIDIA H100", backend="cuda", architecture="sm_90a")
A100 = DeviceInfo(kind="NVIDIA A100", backend="cuda", architecture="sm_80")


def _cases(n_cols: int, dtype: str = "float32") -> dict[str, dict[str, Any]]:
    return {f"4x{n_cols}": {"n_rows": 4, "n_cols": n_cols, "dtype": dtype}}


def _started(
    cases: dict[str, dict[str, Any]],
    *,
    device: DeviceInfo = H200,
    triton: str = "3.4.0",
    kernel_path: str = "/k/softmax/kernel.py",
    prior_runs: tuple[str, ...] = (),
) -> RunStarted:
    """A run's start; the bundle is named by its cases, so equal cases are one bundle."""
    bundle = digest_json(cases)
    return run_started().model_copy(
        update={
            "device": device,
            "tool_versions": ToolVersions(tlxdb="0.1", python="3.11", triton=triton, torch="2.13"),
            "kernel_path": kernel_path,
            "bundle_digest": bundle,
            "measurement_key": digest_json([device.kind, triton, "2.13", bundle]),
            "case_parameters": cases,
            "prior_runs": list(prior_runs),
        }
    )


def _run(
    winner_block: int,
    cases: dict[str, dict[str, Any]],
    *,
    device: DeviceInfo = H200,
    triton: str = "3.4.0",
    base: str = "base",
    kernel_path: str = "/k/softmax/kernel.py",
    prior_runs: tuple[str, ...] = (),
) -> list[Event]:
    """A run of one kernel whose only candidate (BLOCK=winner_block) was promoted."""
    started = _started(
        cases, device=device, triton=triton, kernel_path=kernel_path, prior_runs=prior_runs
    )
    events: list[Event] = [started, BundleValidated(passed=True, checks=[])]
    events += candidate_events(BASELINE_ID, f"def kernel(): pass  # {base}")
    events += candidate_events(
        "c001",
        f"def kernel(): return {winner_block}  # {base}",
        base_us=50.0,
        outcome=Outcome.PROMOTED,
        knobs={"BLOCK": winner_block, "num_warps": 4},
    )
    events.append(
        RunFinished(stopping_reason=StoppingReason.MAX_ROUNDS, success=True, winner_id="c001")
    )
    return events


@pytest.fixture
def store(tmp_path) -> Store:
    s = Store(tmp_path / "s.duckdb")
    ingest_run(s, "near_shape", _run(1024, _cases(512)))  # n_cols 512: 1 doubling away
    ingest_run(s, "far_shape", _run(64, _cases(64)))  # 4 doublings away
    ingest_run(s, "other_dtype", _run(2048, _cases(1024, "float16")))  # a dtype differs: 1
    ingest_run(s, "other_triton", _run(256, _cases(1024), triton="3.3.0"))  # same bundle
    ingest_run(s, "h100", _run(128, _cases(1024), device=H100))  # same family, other GPU
    ingest_run(s, "edited", _run(32, _cases(1024), base="edited"))  # another baseline source
    ingest_run(s, "a100", _run(16, _cases(1024), device=A100))  # another family: left out
    ingest_run(s, "imported", _run(8, _cases(1024), device=A100, kernel_path="/tlx/other.py"))
    ingest_run(s, "other_kernel", _run(4, _cases(1024), kernel_path="/k/rmsnorm/kernel.py"))
    ingest_run(s, "asking", _run(2, _cases(1024), prior_runs=("imported",)))
    return s


def test_other_runs_of_the_kernel_rank_by_distance_and_name_what_differs(store):
    ranked = lookups.nearest_configs(store, "asking", limit=20)
    assert ranked is not None
    assert [(n.rank, n.from_run_id, n.distance) for n in ranked] == [
        (1, "other_triton", 0.5),  # same cases, another Triton
        (2, "near_shape", 1.0),  # |log2 1024 - log2 512| = 1
        (3, "other_dtype", 1.0),  # the dtype differs
        (4, "h100", 1.0),  # the same cases on another GPU of the family
        (5, "edited", 1.0),  # the same cases, the kernel edited since
        (6, "imported", 1.0),  # named with --prior-run: another device (and family)
        (7, "far_shape", 4.0),  # log2 1024 - log2 64
    ]
    # ties (distance 1) go to the best pooled speedup, then the earliest run: every run here
    # measured 2x, so the order of ingest decides
    by_run = {n.from_run_id: n for n in ranked}
    assert by_run["near_shape"].knobs == {"BLOCK": 1024, "num_warps": 4}
    assert by_run["near_shape"].speedup == pytest.approx(2.0)
    assert by_run["near_shape"].differs == "bundle: cases 4x512 → 4x1024; same device"
    assert by_run["other_dtype"].differs == "bundle: case parameters changed; same device"
    assert by_run["other_triton"].differs == "same bundle; same device; Triton 3.3.0 → 3.4.0"
    assert by_run["h100"].differs == "same bundle; device: NVIDIA H100 → NVIDIA H200"
    assert by_run["edited"].differs == "same bundle; same device; kernel source edited"
    assert (
        by_run["imported"].from_prior_run and "named with --prior-run" in by_run["imported"].differs
    )
    assert not by_run["near_shape"].from_prior_run


def test_new_case_names_are_named_and_a_run_without_history_has_none(store):
    cases = {"8x2048": {"n_rows": 8, "n_cols": 2048, "dtype": "float32"}}
    ingest_run(store, "renamed", _run(2, cases))
    ranked = lookups.nearest_configs(store, "renamed", limit=3)
    assert ranked is not None
    # 4x1024 float32 is a doubling away in each of two parameters; 4x512 three
    assert [(n.from_run_id, n.distance) for n in ranked] == [
        ("asking", 2.0),
        ("other_triton", 2.5),
        ("near_shape", 3.0),
    ]
    assert ranked[0].differs.startswith("bundle: cases 4x1024 → 8x2048")
    ingest_run(store, "alone", _run(2, _cases(1024), kernel_path="/k/alone/kernel.py"))
    assert lookups.nearest_configs(store, "alone") == []
    assert lookups.nearest_configs(store, "not-a-run") is None  # not in the store yet


def _many_runs(store: Store, n_runs: int, seed: int) -> list[str]:
    """Runs of two kernels on three shapes, two GPUs of a family and one of another, two Tritons
    and an edited source, some naming an earlier run with --prior-run; each decides a few sources
    of a small pool (with 99% CIs), so sources recur across runs (pooled, ranked at their nearest
    run), within one (two promotions of one source) and tie on distance."""
    rng = random.Random(seed)
    shapes = [_cases(1024), _cases(512), _cases(1024, "float16")]
    run_ids: list[str] = []
    for i in range(n_runs):
        base = rng.choice(["base", "base", "edited"])
        started = _started(
            rng.choice(shapes),
            device=rng.choice([H200, H200, H100, A100]),
            triton=rng.choice(["3.3.0", "3.4.0"]),
            kernel_path=rng.choice(["/k/softmax/kernel.py", "/k/rmsnorm/kernel.py"]),
            prior_runs=tuple(rng.sample(run_ids, 1)) if run_ids and rng.random() < 0.2 else (),
        )
        events: list[Event] = [started, *candidate_events(BASELINE_ID, f"pass  # {base}")]
        for c in range(rng.randint(0, 5)):
            block = rng.choice([16, 32, 64, 128, 256, 512])
            speedup = rng.choice([1.05, 1.1, 1.2, 1.3])
            outcome = Outcome.PROMOTED if rng.random() < 0.7 else Outcome.REJECTED
            half = rng.choice([0.02, 0.05])
            events += decided(
                f"c{c:03d}",
                digest_text(f"BLOCK={block}  # {base}"),
                outcome,
                speedup,
                (speedup - half, speedup + half),
            )
        run_id = f"r{i:02d}"
        ingest_run(store, run_id, events)
        run_ids.append(run_id)
    return run_ids


def test_the_lookup_reads_exactly_the_views_first_rows_of_each_run(tmp_path):
    """nearest_configs reads only the runs within reach of the first `limit` rows and their
    estimates (queries/reports/nearest_reach.sql, then the view with its parameters bound): its
    rows are the view's, for every run of the store and every limit."""
    store = Store(tmp_path / "s.duckdb")
    run_ids = _many_runs(store, 12, seed=3)
    view = queries.query(store, "SELECT * FROM nearest_history ORDER BY run_id, rank").to_pylist()
    fields = set(NearestConfig.model_fields)
    ranked = 0
    for run_id in run_ids:
        rows = [
            {**{f: r[f] for f in fields}, "knobs": json.loads(r["knobs"] or "{}")}
            for r in view
            if r["run_id"] == run_id
        ]
        ranked += len(rows) > 3
        for limit in (1, 2, 3, 5, 100):
            near = lookups.nearest_configs(store, run_id, limit=limit)
            assert near is not None
            assert [n.model_dump(include=fields) for n in near] == rows[:limit], (
                f"{run_id}, limit {limit}"
            )
    assert ranked >= 4  # several runs rank more rows than the smaller limits read
