"""tune's proposals, whole runs of them, held to a recorded sequence.

Each scenario drives the provider as the loop would (test_tune.drive: a cost model stands in for
the measurement) over a fixed knob space and records every proposal it makes, text included, and
how the search ended. golden/tune_sequences.json holds what tune proposed when this test was
written; a change of the search's behaviour (another move, another order, another word of
evidence) shows here as the first scenario and proposal that differ. A deliberate change is
recorded again with `python tests/optimizer/providers/test_tune_sequences.py --write` and the
diff of the JSON file reviewed with the change.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # recording: the imports below as pytest's rootdir conftest sets them
    sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).resolve().parents[3])]

from test_tune import (
    BLOCKS_PER_ROW,
    GPU_CASES,
    MATMUL,
    MATMUL_CASES,
    RMSNORM,
    SOFTMAX,
    best_of,
    computed,
    context,
    drive,
    gpu_matmul,
    gpu_rmsnorm,
    gpu_rows_per_shape,
    gpu_softmax,
    interpreter_softmax,
    near,
)
from test_tune_landscape import CASES as LANDSCAPE_CASES
from test_tune_landscape import landscape_cost, read_landscape

from optimizer.bundle.spec import CaseSpec
from optimizer.providers.base import Proposal, SearchExhausted
from optimizer.providers.tune import TuneProvider
from queries.models import Exclusion
from tlxstore.events import KernelLaunch

GOLDEN = Path(__file__).parent / "golden" / "tune_sequences.json"
CORPUS = Path(__file__).parent / "tune_corpus"


def bowl(config: dict[str, int]) -> float:
    """A smooth optimum in log2 space, for any knob names: blocks at 64, warps at 8, stages at
    3, other integers at 4."""
    cost = 100.0
    for name, v in sorted(config.items()):
        best = (
            8
            if "warps" in name
            else 3
            if "stages" in name
            else 64
            if "BLOCK" in name.upper()
            else 4
        )
        cost *= 1 + 0.1 * abs(math.log2(v) - math.log2(best))
    return cost


def fails_above_1024(config: dict[str, int]) -> float | None:
    return None if config["BLOCK"] > 1024 else interpreter_softmax(config)


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def _proposal(p: Proposal) -> dict[str, Any]:
    """What the search decided, readable (the move, the configuration, the evidence), and a
    digest of the whole proposal: every other field and the source's every byte are held too."""
    whole = p.model_dump(mode="json")
    return {
        "change": p.change,
        "knobs": p.knobs,
        "hypothesis_kind": p.hypothesis_kind,
        "remeasures": p.remeasures,
        "evidence": p.evidence,
        "source_sha256": hashlib.sha256(p.source.encode()).hexdigest(),
        "proposal_sha256": _digest(whole),
    }


def _run(proposals: list[Proposal], end: SearchExhausted | None) -> dict[str, Any]:
    return {
        "proposals": [_proposal(p) for p in proposals],
        "end": None if end is None else end.model_dump(mode="json"),
    }


def _driven(source: str, cost: Callable[[dict[str, int]], float | None], **kw: Any):
    proposals, _, end = drive(source, cost, **kw)
    return _run(proposals, end)


def _second_run() -> dict[str, Any]:
    """A second run of the host softmax with the first in the store: the best known start."""
    _, first, _ = drive(SOFTMAX, interpreter_softmax, run_id="r1")
    proposals, _, end = drive(
        SOFTMAX,
        interpreter_softmax,
        run_id="r2",
        measured=first,
        prior_best=[best_of(first)],
    )
    return _run(proposals, end)


def _one_round_of_four() -> dict[str, Any]:
    """Four candidates of one round: each proposal differs from those before it."""
    provider = TuneProvider()
    ctx = context(MATMUL, [], backend="cuda", cases=MATMUL_CASES)
    out = [
        provider.propose(ctx.model_copy(update={"candidate_index": i}), lambda e: None)
        for i in range(1, 5)
    ]
    assert all(isinstance(p, Proposal) for p in out)
    return _run(out, None)  # type: ignore[arg-type]


def _landscape(seed: int) -> dict[str, Any]:
    """The H200 matmul landscape (test_tune_landscape) with 1.5% noise of a fixed seed."""
    _, measured_us = landscape_cost(read_landscape(), noise=0.015, seed=seed)
    return _driven(MATMUL, measured_us, backend="cuda", cases=LANDSCAPE_CASES, limit=36)


def _two_kernels() -> dict[str, Any]:
    """Two kernels in one file: the one that dominates the observed time is tuned first."""
    source = (CORPUS / "two_kernels" / "kernel.py").read_text()
    launches = [
        KernelLaunch(kernel=k, num_warps=4, num_stages=3, total_us=t)
        for k, t in (("_sumsq_kernel", 1.0), ("_apply_kernel", 100.0))
    ]
    cases = [CaseSpec(case_id="4x4096", parameters={"n_rows": 4, "n_cols": 4096})]
    return _driven(source, bowl, launches=launches, cases=cases)


def _autotune_generated() -> dict[str, Any]:
    """A generated autotune list on a GPU: every config pinned, then the search from the best."""
    source = (CORPUS / "autotune_generated" / "kernel.py").read_text()
    return _driven(source, bowl, backend="cuda", cases=MATMUL_CASES, limit=24)


def _unreadable() -> dict[str, Any]:
    """A computed block with no launch observed: unreadable, recorded once, and the end."""
    source = (CORPUS / "calculate_settings" / "kernel.py").read_text()
    recorded: list = []
    provider = TuneProvider()
    ends = [provider.propose(context(source, []), recorded.append) for _ in range(2)]
    assert all(isinstance(e, SearchExhausted) for e in ends)
    return {
        "proposals": [],
        "end": ends[-1].model_dump(mode="json"),
        "recorded": [e.model_dump(mode="json") for e in recorded],
    }


SCENARIOS: dict[str, Callable[[], dict[str, Any]]] = {
    "softmax_interpreter": lambda: _driven(SOFTMAX, interpreter_softmax),
    "softmax_interpreter_failures": lambda: _driven(SOFTMAX, fails_above_1024),
    "softmax_declared_space": lambda: _driven(
        SOFTMAX, interpreter_softmax, tuning_space={"BLOCK": [64, 128, 256, 1024, 2048]}
    ),
    "softmax_second_run": _second_run,
    "softmax_excluded": lambda: _driven(
        SOFTMAX,
        interpreter_softmax,
        exclusions=[
            Exclusion(signature="BLOCK=512", outcome="failed", reason="build failed"),
            Exclusion(signature="BLOCK=4096,num_warps=8", outcome="rejected", reason="slower"),
            Exclusion(signature="rewrote the inner loop", outcome="rejected", reason="slower"),
        ],
    ),
    "softmax_seeded": lambda: _driven(
        SOFTMAX,
        interpreter_softmax,
        nearest=[
            near(1, {"TILE": 64}),
            near(2, {"BLOCK": 2048}),
            near(3, {"BLOCK": 1024, "num_warps": 4}),
        ],
        history_seeds=2,
    ),
    "softmax_gpu": lambda: _driven(SOFTMAX, gpu_softmax, backend="cuda", cases=GPU_CASES, limit=16),
    "rmsnorm_gpu": lambda: _driven(RMSNORM, gpu_rmsnorm, backend="cuda", cases=GPU_CASES, limit=16),
    "matmul_gpu": lambda: _driven(MATMUL, gpu_matmul, backend="cuda", cases=MATMUL_CASES, limit=40),
    "matmul_landscape": lambda: _landscape(0),
    "matmul_one_round_of_four": _one_round_of_four,
    "rows_per_shape_gpu": lambda: _driven(
        BLOCKS_PER_ROW,
        gpu_rows_per_shape,
        launches=computed("_rms_norm_looped_forward", (128, 4), (1024, 8)),
        backend="cuda",
        cases=[
            CaseSpec(case_id=f"w{n}", parameters={"n_rows": 4096, "n_cols": n})
            for n in (100, 16000)
        ],
        limit=24,
    ),
    "two_kernels": _two_kernels,
    "autotune_generated_gpu": _autotune_generated,
    "unreadable": _unreadable,
}


def record() -> dict[str, Any]:
    return {name: scenario() for name, scenario in SCENARIOS.items()}


def _first_difference(want: dict[str, Any], got: dict[str, Any]) -> str:
    for name in want.keys() | got.keys():
        w, g = want.get(name), got.get(name)
        if w == g:
            continue
        if w is None or g is None:
            return f"{name}: scenario {'added' if w is None else 'missing'}"
        wp, gp = w["proposals"], g["proposals"]
        for i, (a, b) in enumerate(zip(wp, gp, strict=False)):
            if a != b:
                fields = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
                return f"{name}: proposal {i + 1} differs in {fields}: {a} != {b}"
        if len(wp) != len(gp):
            return f"{name}: {len(wp)} proposals recorded, {len(gp)} made"
        return f"{name}: the end differs: {w['end']} != {g['end']}"
    return ""


def test_tune_proposes_the_recorded_sequence_in_every_scenario():
    want = json.loads(GOLDEN.read_text())
    got = json.loads(json.dumps(record()))
    assert got == want, _first_difference(want, got)


def test_the_recorded_sequences_cover_every_kind_of_move():
    """The scenarios reach every way tune proposes: a pin, a best known start, a seed, single
    steps, coupled block and warps, paired and combined moves, and both endings."""
    runs = json.loads(GOLDEN.read_text()).values()
    proposals = [p for run in runs for p in run["proposals"]]
    evidence = " ".join(p["evidence"] for p in proposals)
    assert any(p["hypothesis_kind"] == "autotune_pin" for p in proposals)
    assert any(p["remeasures"] for p in proposals if "nearest history" not in p["evidence"])
    assert "nearest history #2 (seed 1 of 2)" in evidence
    assert "each thread keeps the values it holds now" in evidence  # coupled
    assert "moving" in evidence and "together" in evidence  # paired
    assert "each measured within 10% of the best" in evidence  # combined
    assert "has made no measurable difference" in evidence  # inert
    ends = [run["end"]["stopping_reason"] for run in runs if run["end"]]
    assert {"search_exhausted", "knobs_unreadable"} <= set(ends)


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/optimizer/providers/test_tune_sequences.py --write")
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text(json.dumps(record(), indent=1, ensure_ascii=False, sort_keys=True) + "\n")
