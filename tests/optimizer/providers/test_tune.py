"""The tune provider's search, driven against deterministic cost models (no harness).

Each test builds the ProviderContext the loop would build: the parent, the original, every
measured candidate (this run and earlier ones) and the prior bests. A cost function stands in for
the measurement so the search itself is checked exactly; the examples' tests run it for real.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import nearest_config

from optimizer.bundle.spec import CaseSpec, TargetSpec
from optimizer.decision.identity import source_hashes
from optimizer.evaluation.launches import observed_values
from optimizer.providers import ProviderOptions, registry
from optimizer.providers.base import MeasuredCandidate, Proposal, ProviderContext, SearchExhausted
from optimizer.providers.knobs import KnobError, apply_knobs, find_knobs, knob_values
from optimizer.providers.tune import TuneProvider, declared_space
from queries.models import Exclusion, NearestConfig
from tlxstore.events import DeviceInfo, KernelLaunch

REPO = Path(__file__).resolve().parents[3]
SOFTMAX = (REPO / "examples" / "softmax" / "kernel.py").read_text()
RMSNORM = (REPO / "examples" / "rmsnorm" / "kernel.py").read_text()
MATMUL = (REPO / "examples" / "matmul" / "kernel.py").read_text()
CORPUS = REPO / "tests" / "optimizer" / "providers" / "tune_corpus"
HOST_CASES = [CaseSpec(case_id="2x4096", parameters={"n_rows": 2, "n_cols": 4096})]
GPU_CASES = [CaseSpec(case_id="16384x8192", parameters={"n_rows": 16384, "n_cols": 8192})]

Cost = Callable[[dict[str, int]], float | None]  # microseconds; None: the candidate failed


def interpreter_softmax(config: dict[str, int]) -> float:
    """The host example's shape: a fixed cost per loop trip, a small one per element."""
    block = config["BLOCK"]
    return 2 * math.ceil(4096 / block) * 1000.0 + block * 0.2


def context(
    source: str,
    measured: list[MeasuredCandidate],
    *,
    parent: str | None = None,
    run_id: str = "r1",
    backend: str = "cpu",
    cases: list[CaseSpec] = HOST_CASES,
    prior_best: list[MeasuredCandidate] | None = None,
    tuning_space: dict | None = None,
    launches: list[KernelLaunch] | None = None,
    nearest: list[NearestConfig] | None = None,
    history_seeds: int = 0,
    exclusions: list[Exclusion] | None = None,
) -> ProviderContext:
    return ProviderContext(
        run_id=run_id,
        round=1 + sum(m.run_id == run_id for m in measured),
        candidate_index=1,
        target=TargetSpec(
            backend=backend,
            architecture="sm_90" if backend == "cuda" else "",
            tuning_space=tuning_space,
        ),
        device=DeviceInfo(
            kind="cpu-interpreter" if backend == "cpu" else "NVIDIA H200",
            backend=backend,
            architecture="sm_90" if backend == "cuda" else None,
        ),
        cases=cases,
        parent_id="baseline",
        parent_source=parent or source,
        original_source=source,
        measured=measured,
        prior_best=prior_best or [],
        nearest=nearest or [],
        history_seeds=history_seeds,
        launches=launches or [],
        exclusions=exclusions or [],
    )


def drive(
    source: str,
    cost: Cost,
    *,
    run_id: str = "r1",
    measured=None,
    prior_best=None,
    limit: int = 40,
    min_speedup: float = 1.01,
    launches: list[KernelLaunch] | None = None,
    **kw,
):
    """Run the provider as the loop would; return (proposals, measured, final result). The cost
    sees every knob, computed ones too (read with the observed `launches`)."""
    provider = TuneProvider()
    measured = list(measured or [])
    observed = observed_values(launches or [])

    def values_of(src: str) -> dict[str, int]:
        return find_knobs(src, observed).values()

    start = cost(values_of(source))
    assert start is not None
    parent, incumbent = source, start
    proposals: list[Proposal] = []
    for i in range(limit):
        ctx = context(
            source,
            measured,
            parent=parent,
            run_id=run_id,
            prior_best=prior_best,
            launches=launches,
            **kw,
        )
        result = provider.propose(ctx, lambda event: None)
        if isinstance(result, SearchExhausted):
            return proposals, measured, result
        proposals.append(result)
        t = cost(values_of(result.source))
        promoted = t is not None and incumbent / t >= min_speedup
        measured.append(
            MeasuredCandidate(
                run_id=run_id,
                candidate_id=f"c{i + 1:03d}",
                source_hash=source_hashes(result.source)[0],
                knobs=result.knobs,
                outcome="failed" if t is None else "promoted" if promoted else "rejected",
                speedup=None if t is None else start / t,
            )
        )
        if promoted:
            parent, incumbent = result.source, t
    return proposals, measured, None


def best_of(measured: list[MeasuredCandidate]) -> MeasuredCandidate:
    return max((m for m in measured if m.speedup), key=lambda m: m.speedup or 0)


def test_a_proposal_is_a_real_rewrite_with_its_hypothesis():
    result = TuneProvider().propose(context(SOFTMAX, []), lambda e: None)
    assert isinstance(result, Proposal)
    assert result.source == apply_knobs(SOFTMAX, result.knobs) != SOFTMAX
    assert result.knobs == {"BLOCK": 512}  # a fresh direction: half the room, at most x4
    assert result.change == "BLOCK 128→512"
    assert result.expected_effect == "BLOCK 128→512: 1/4 the loop trips per program"
    assert result.hypothesis and result.evidence and result.risk
    assert result.hypothesis_kind == "block_size"


PER_BLOCK = (CORPUS / "tutorial_add" / "kernel.py").read_text()  # grid: cdiv(n, meta[BLOCK_SIZE])
PER_ROW = textwrap.dedent(
    """
    import triton
    import triton.language as tl


    @triton.jit
    def _double_rows(x_ptr, n_cols, BLOCK_SIZE: tl.constexpr):
        cols = tl.arange(0, BLOCK_SIZE)
        row = x_ptr + tl.program_id(0) * n_cols
        tl.store(row + cols, tl.load(row + cols, mask=cols < n_cols) * 2, mask=cols < n_cols)


    def double_rows(x):
        _double_rows[(x.shape[0],)](x, x.shape[1], BLOCK_SIZE=BLOCK)


    BLOCK = 256
    """
)


def expected_effect(source: str, space: dict, backend: str = "cpu") -> str:
    """The expected effect of tune's one move in a declared space of two values."""
    ctx = context(source, [], backend=backend, tuning_space=space)
    out = TuneProvider().propose(ctx, lambda e: None)
    assert isinstance(out, Proposal), out
    return out.expected_effect


def test_the_expected_effect_says_which_way_the_programs_and_their_work_go():
    """A block doubled over a grid that divides by it: twice the elements per program, half as
    many programs (it once read "16x as many"); halved: twice the programs, each half the work
    (once "2x the work"). A grid of one program per row keeps its count: only the elements
    each program covers change. More warps: each thread handles half the elements."""
    up = PER_BLOCK.replace("BLOCK_SIZE=32", "BLOCK_SIZE=256")
    down = PER_BLOCK.replace("BLOCK_SIZE=32", "BLOCK_SIZE=512")
    assert expected_effect(up, {"BLOCK_SIZE": [256, 512]}) == (
        "BLOCK_SIZE 256→512: each program covers 2x the elements, 1/2 as many programs"
    )
    assert expected_effect(down, {"BLOCK_SIZE": [256, 512]}) == (
        "BLOCK_SIZE 512→256: 2x as many programs, each doing 1/2 the work"
    )
    assert expected_effect(PER_ROW, {"BLOCK": [256, 512]}) == (
        "BLOCK 256→512: each program covers 2x the elements"
    )
    assert expected_effect(PER_ROW, {"BLOCK": [128, 256]}) == (
        "BLOCK 256→128: each program covers 1/2 the elements"
    )
    warps = {"BLOCK_SIZE": [256], "num_warps": [4, 8], "num_stages": [3]}
    assert expected_effect(up, warps, backend="cuda") == (
        "num_warps 4→8: each thread handles 1/2 the elements"
    )


def test_on_the_interpreter_only_constexpr_knobs_are_searched():
    proposals, _, done = drive(SOFTMAX, interpreter_softmax)
    assert all(
        set(p.knobs) == {"BLOCK"} for p in proposals
    )  # num_warps/num_stages do nothing there
    assert isinstance(done, SearchExhausted)


def test_the_search_reaches_the_best_block_accelerating_toward_what_helped():
    proposals, measured, done = drive(SOFTMAX, interpreter_softmax)
    assert [p.change for p in proposals[:2]] == ["BLOCK 128→512", "BLOCK 512→4096"]
    assert best_of(measured).knobs == {"BLOCK": 4096}
    assert len(proposals) <= 4
    assert isinstance(done, SearchExhausted) and "BLOCK=4096" in done.reason


def test_no_configuration_measured_in_any_run_is_proposed_again():
    _, first, _ = drive(SOFTMAX, interpreter_softmax, run_id="r1")
    proposals, _, _ = drive(SOFTMAX, interpreter_softmax, run_id="r2", measured=first)
    seen = {m.source_hash for m in first} | {source_hashes(SOFTMAX)[0]}
    assert all(source_hashes(p.source)[0] not in seen for p in proposals)


def test_a_second_run_starts_from_the_best_configuration_of_earlier_runs():
    _, first, _ = drive(SOFTMAX, interpreter_softmax, run_id="r1")
    best = best_of(first)
    proposals, second, done = drive(
        SOFTMAX, interpreter_softmax, run_id="r2", measured=first, prior_best=[best]
    )
    assert proposals[0].knobs == best.knobs
    assert (
        proposals[0].remeasures == f"r1/{best.candidate_id}"
    )  # re-measured, not answered from the store
    assert len(proposals) <= 3 and isinstance(done, SearchExhausted)


def measured_block(
    run_id: str,
    candidate_id: str,
    block: int,
    outcome: str,
    speedup: float,
    ci: tuple[float, float] | None,
) -> MeasuredCandidate:
    """A decided softmax candidate of BLOCK `block`, as the store lists one."""
    source = apply_knobs(SOFTMAX, {"BLOCK": block})
    return MeasuredCandidate(
        run_id=run_id,
        candidate_id=candidate_id,
        source_hash=source_hashes(source)[0],
        knobs={**knob_values(SOFTMAX), "BLOCK": block},
        outcome=outcome,
        speedup=speedup,
        ci_low=None if ci is None else ci[0],
        ci_high=None if ci is None else ci[1],
    )


def best_first(measured: list[MeasuredCandidate]) -> list[MeasuredCandidate]:
    """ctx.prior_best as the store lists it: the promoted ones, best single figure first."""
    return sorted((m for m in measured if m.outcome == "promoted"), key=lambda m: -(m.speedup or 0))


def at_block(
    block: int, measured: list[MeasuredCandidate], run_id: str, prior_best: list[MeasuredCandidate]
) -> ProviderContext:
    """The softmax context of a run whose incumbent has BLOCK `block`."""
    parent = apply_knobs(SOFTMAX, {"BLOCK": block})
    return context(SOFTMAX, measured, parent=parent, run_id=run_id, prior_best=prior_best)


def test_a_start_re_measured_luckier_in_this_run_does_not_send_it_back_to_a_worse_one():
    """The second run re-adopted BLOCK=4096 and measured it better than the first run did; the
    next proposal must not take BLOCK=512 (3.2x) for the best known start against 4096 (17x)."""
    first = [
        measured_block("r1", "c001", 512, "promoted", 3.18, (3.05, 3.60)),
        measured_block("r1", "c002", 4096, "promoted", 18.1, (14.5, 20.5)),
        measured_block("r1", "c003", 2048, "rejected", 7.27, (7.01, 8.24)),
    ]
    again = measured_block("r2", "c001", 4096, "promoted", 25.7, (13.1, 27.3))
    prior_best = best_first(first)
    result = TuneProvider().propose(
        at_block(4096, [*first, again], "r2", prior_best), lambda e: None
    )
    if isinstance(result, Proposal):
        assert result.remeasures is None and result.knobs != {"BLOCK": 512}, result.hypothesis
    else:  # every neighbour of 4096 is measured: the search is over
        assert (
            "BLOCK=4096 at 19.3x the baseline [99% CI 16.5, 22.6], pooled over 2" in result.reason
        )


def test_the_best_known_start_is_the_best_by_pooled_estimate_not_by_its_luckiest_measurement():
    """BLOCK=1024 measured 10x twice, once 20x on a noisy measurement: pooled about 10x. BLOCK=2048
    measured 12x once, precisely. The start is 2048, and the text says what each figure pools."""
    prior = [
        measured_block("r1", "c001", 1024, "promoted", 10.0, (9.6, 10.4)),
        measured_block("r1", "c002", 2048, "promoted", 12.0, (11.6, 12.4)),
        measured_block("r2", "c001", 1024, "promoted", 20.0, (5.0, 80.0)),
        measured_block("r2", "c002", 1024, "rejected", 10.1, (9.7, 10.5)),
    ]
    prior_best = best_first(prior)
    assert prior_best[0].knobs["BLOCK"] == 1024  # the luckiest single figure
    start = TuneProvider().propose(
        context(SOFTMAX, prior, run_id="r3", prior_best=prior_best), lambda e: None
    )
    assert isinstance(start, Proposal) and start.knobs == {"BLOCK": 2048}
    assert start.remeasures == "r1/c002"
    assert "12x the baseline [99% CI" in start.evidence and "1 measurement" in start.evidence

    # once 2048 is measured in this run at 11x, 2048 pools two measurements; it stays the best
    # known, so nothing is adopted again, and the search's text carries the pooled figure
    remeasured = measured_block("r3", "c001", 2048, "promoted", 11.0, (10.6, 11.4))
    after = TuneProvider().propose(
        at_block(2048, [*prior, remeasured], "r3", prior_best), lambda e: None
    )
    assert isinstance(after, Proposal) and after.remeasures is None
    assert "BLOCK=2048 at 11.5x the baseline [99% CI" in after.evidence
    assert "pooled over 2 measurements" in after.evidence


def test_the_best_known_start_need_not_have_been_promoted():
    """The prior run promoted BLOCK=512 (3x) and measured BLOCK=1024 at 6x but rejected it (it
    did not beat that run's incumbent). 512 is no best known start: 1024 is, re-measured against
    this run's baseline (a new user's second run that adopted only promoted configurations
    adopted nothing and ended without a winner)."""
    prior = [
        measured_block("r1", "c001", 512, "promoted", 3.0, (2.9, 3.1)),
        measured_block("r1", "c002", 1024, "rejected", 6.0, (5.8, 6.2)),
    ]
    result = TuneProvider().propose(
        context(SOFTMAX, prior, run_id="r2", prior_best=[prior[0]]), lambda e: None
    )
    assert isinstance(result, Proposal) and result.knobs == {"BLOCK": 1024}
    assert result.remeasures == "r1/c002"
    assert "promoted in no run: a run's incumbent or interval held it back" in result.evidence
    within_noise = [prior[0], measured_block("r1", "c002", 1024, "rejected", 1.02, (0.9, 1.1))]
    result = TuneProvider().propose(
        context(SOFTMAX, within_noise, run_id="r2", prior_best=[prior[0]]), lambda e: None
    )
    # 1024's figure holds 1.0 and is below 512's: the promoted 512 is the start
    assert isinstance(result, Proposal) and result.knobs == {"BLOCK": 512}
    assert result.remeasures == "r1/c001" and "promoted in run r1, c001" in result.evidence
    noise = [measured_block("r1", "c001", 1024, "rejected", 1.05, (0.95, 1.15))]
    result = TuneProvider().propose(context(SOFTMAX, noise, run_id="r2"), lambda e: None)
    assert isinstance(result, Proposal) and result.remeasures is None  # within the noise


def test_a_failed_configuration_closes_its_direction():
    def cost(config):  # anything above 1024 fails to build
        return None if config["BLOCK"] > 1024 else interpreter_softmax(config)

    proposals, measured, _ = drive(SOFTMAX, cost)
    tried = [p.knobs["BLOCK"] for p in proposals]
    assert sum(1 for b in tried if b > 1024) <= 2  # bisects back, never walks into the failure
    assert best_of(measured).knobs == {"BLOCK": 1024}


def test_two_proposals_in_one_round_are_different():
    provider = TuneProvider()
    ctx = context(SOFTMAX, [])
    first = provider.propose(ctx, lambda e: None)
    second = provider.propose(ctx.model_copy(update={"candidate_index": 2}), lambda e: None)
    assert isinstance(first, Proposal) and isinstance(second, Proposal)
    assert first.source != second.source


def test_a_declared_tuning_space_is_the_whole_search():
    space = {"BLOCK": [64, 128, 256]}
    proposals, _, done = drive(SOFTMAX, interpreter_softmax, tuning_space=space)
    assert {p.knobs["BLOCK"] for p in proposals} <= {128, 256}
    assert isinstance(done, SearchExhausted)


def test_a_declared_space_is_validated_and_sorted():
    assert declared_space({"BLOCK": [256, 64, 64]}) == {"BLOCK": [64, 256]}
    assert declared_space(None) == {}
    with pytest.raises(KnobError, match="tuning_space.BLOCK"):
        declared_space({"BLOCK": []})
    with pytest.raises(KnobError, match="positive integer"):
        declared_space({"num_warps": [4, "8"]})


def test_a_kernel_without_knobs_exhausts_at_once():
    source = "def f(x):\n    return x\n"
    result = TuneProvider().propose(context(source, []), lambda e: None)
    assert isinstance(result, SearchExhausted) and "no tunable" in result.reason


def gpu_rmsnorm(config: dict[str, int]) -> float:
    """An H200-like model: bandwidth rises with bytes in flight, falls when threads spill."""
    block, warps = config["BLOCK"], config["NUM_WARPS"]
    per_thread = block / (32 * warps)
    efficiency = min(1.0, block * warps / 65536) ** 0.3 * (0.5 if per_thread > 64 else 1.0)
    efficiency *= 1.0 if per_thread >= 2 else 0.6
    return 16384 * 8192 * 4 / (4.24e12 * max(efficiency, 0.05)) * 1e6 * (1 + 8192 / block * 0.02)


def test_on_a_gpu_warps_and_blocks_are_searched_within_the_register_limit():
    proposals, measured, _ = drive(RMSNORM, gpu_rmsnorm, backend="cuda", cases=GPU_CASES, limit=12)
    assert any("NUM_WARPS" in p.change for p in proposals)
    for p in proposals:
        k = knob_values(p.source)
        assert k["BLOCK"] / (32 * k["NUM_WARPS"]) <= 64
    start = gpu_rmsnorm(knob_values(RMSNORM))
    assert start / gpu_rmsnorm(best_of(measured).knobs) > 1.5


def gpu_matmul(config: dict[str, int]) -> float:
    """H200-like: throughput grows with the tile's reuse up to 128x256, with BLOCK_K 64 and four
    stages; too few accumulator values per thread waste warps."""
    bm, bn, bk = config["BLOCK_M"], config["BLOCK_N"], config["BLOCK_K"]
    acc_per_thread = bm * bn / (32 * config["num_warps"])
    efficiency = min(1.0, (2 * bm * bn / (bm + bn)) / 170.0)
    efficiency *= 0.85 if acc_per_thread < 16 else 1.0
    efficiency *= {16: 0.7, 32: 0.85, 64: 1.0, 128: 0.95}.get(bk, 0.8)
    efficiency *= {1: 0.5, 2: 0.8, 3: 0.92, 4: 1.0, 5: 0.98}[config["num_stages"]]
    efficiency *= 1.0 if config["GROUP_M"] >= 4 else 0.95
    return 2 * 4096**3 / (750e12 * efficiency) * 1e6


MATMUL_CASES = [
    CaseSpec(case_id="4096", parameters={"M": 4096, "N": 4096, "K": 4096, "dtype": "bfloat16"})
]


def test_matmul_tiles_respect_shared_memory_and_tl_dot_minimums():
    proposals, _, _ = drive(MATMUL, gpu_matmul, backend="cuda", cases=MATMUL_CASES, limit=36)
    assert len(proposals) >= 12
    for p in proposals:
        k = knob_values(p.source)
        smem = k["num_stages"] * (k["BLOCK_M"] * k["BLOCK_K"] + k["BLOCK_K"] * k["BLOCK_N"]) * 2
        assert smem <= 232448, p.change
        assert min(k["BLOCK_M"], k["BLOCK_N"], k["BLOCK_K"]) >= 16
        assert k["BLOCK_M"] * k["BLOCK_N"] / (32 * k["num_warps"]) <= 128


def test_on_a_gpu_the_matmul_search_reaches_ninety_percent_of_the_best_tile_within_36():
    proposals, measured, _ = drive(MATMUL, gpu_matmul, backend="cuda", cases=MATMUL_CASES, limit=36)
    ideal = 2 * 4096**3 / 750e12 * 1e6
    assert ideal / gpu_matmul(best_of(measured).knobs) >= 0.9
    assert gpu_matmul(knob_values(MATMUL)) / gpu_matmul(best_of(measured).knobs) > 3


def test_measurements_of_another_kernel_are_not_taken_for_this_one():
    edited = SOFTMAX.replace(
        "tl.exp(x - row_max) / row_sum", "tl.exp(x - row_max) * (1.0 / row_sum)"
    )
    _, other, _ = drive(edited, interpreter_softmax, run_id="r0")
    best = best_of(other)
    result = TuneProvider().propose(context(SOFTMAX, other, prior_best=[best]), lambda e: None)
    assert isinstance(result, Proposal) and result.remeasures is None  # no adoption across kernels
    assert result.knobs == {"BLOCK": 512}


def test_an_autotuned_kernel_is_pinned_config_by_config_first():
    source = textwrap.dedent(
        """
        import triton
        import triton.language as tl

        @triton.autotune(configs=[triton.Config({"BLOCK": 64}, num_warps=2),
                                  triton.Config({"BLOCK": 256}, num_warps=4)], key=["n"])
        @triton.jit
        def k(x_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, 1.0, mask=offs < n)

        def run(x):
            k[(1,)](x, x.numel())
        """
    )
    provider = TuneProvider()
    first = provider.propose(context(source, []), lambda e: None)
    assert isinstance(first, Proposal) and first.hypothesis_kind == "autotune_pin"
    assert knob_values(first.source) == {"BLOCK": 64, "num_warps": 2, "num_stages": 3}


def test_the_registry_creates_tune():
    provider = registry.create("tune", ProviderOptions())
    assert isinstance(provider, TuneProvider) and provider.name == "tune" and provider.model is None


def gpu_softmax(config: dict[str, int]) -> float:
    """H200-like: one read and one write at a bandwidth that needs 8-32 values per thread;
    blocks shorter than the 8192-column row pay a second pass and loop trips."""
    block, warps = config["BLOCK"], config["num_warps"]
    per_thread = block / (32 * warps)
    efficiency = 0.95 if 8 <= per_thread <= 32 else 0.75 if per_thread < 8 else 0.5
    passes = 1.0 if block >= 8192 else 1.15 + 0.02 * 8192 / block
    return 16384 * 8192 * 4 / (4.24e12 * efficiency) * passes * 1e6


def test_a_wider_block_that_measured_slower_is_retried_with_proportionally_more_warps():
    start = knob_values(SOFTMAX)
    history = []
    for i, change in enumerate([{"BLOCK": 2048}, {"BLOCK": 8192}], 1):
        config = {**start, **change}
        source = apply_knobs(SOFTMAX, change)
        history.append(
            MeasuredCandidate(
                run_id="r1",
                candidate_id=f"c00{i}",
                source_hash=source_hashes(source)[0],
                knobs=config,
                outcome="promoted" if i == 1 else "rejected",
                speedup=gpu_softmax(start) / gpu_softmax(config),
            )
        )
    assert history[1].speedup < history[0].speedup  # 64 values per thread with 4 warps
    parent = apply_knobs(SOFTMAX, {"BLOCK": 2048})
    result = TuneProvider().propose(
        context(SOFTMAX, history, parent=parent, backend="cuda", cases=GPU_CASES), lambda e: None
    )
    assert isinstance(result, Proposal)
    assert result.change == "BLOCK 2048→8192, num_warps 4→16"  # 16 values per thread, as now
    assert "with 16 warps each thread keeps the values it holds now" in result.evidence


def test_on_a_gpu_the_softmax_search_reaches_the_bandwidth_plateau_within_twelve():
    proposals, measured, _ = drive(SOFTMAX, gpu_softmax, backend="cuda", cases=GPU_CASES, limit=12)
    best = best_of(measured)
    assert gpu_softmax(best.knobs) <= 1.01 * min(
        gpu_softmax({"BLOCK": b, "num_warps": w, "num_stages": 3})
        for b in (1024, 2048, 4096, 8192, 16384)
        for w in (1, 2, 4, 8, 16, 32)
    )


ONE_BLOCK_PER_ROW = (CORPUS / "calculate_settings" / "kernel.py").read_text()
BLOCKS_PER_ROW = (CORPUS / "computed_per_shape" / "kernel.py").read_text()  # a loop over the row


def computed(kernel: str, *settings: tuple[int, int]) -> list[KernelLaunch]:
    """The launches of a kernel whose BLOCK_SIZE and num_warps the host computed, per shape."""
    return [
        KernelLaunch(kernel=kernel, constexprs={"BLOCK_SIZE": b}, num_warps=w, num_stages=3)
        for b, w in settings
    ]


def narrower_is_faster(config: dict[str, int]) -> float:
    return float(sum(v for n, v in config.items() if n.startswith("BLOCK_SIZE")))


def test_a_computed_block_goes_below_its_computed_value_only_where_the_kernel_loops_over_it():
    """The host sized the grid or the one block a row gets for the value it computed: a smaller
    block would leave elements undone, so it is never proposed; a kernel that walks the row in
    steps of the block may take a smaller one."""
    one = computed("_rms_layernorm_forward", (1024, 4))
    proposals, _, end = drive(ONE_BLOCK_PER_ROW, narrower_is_faster, launches=one)
    assert proposals and isinstance(end, SearchExhausted)  # the way up measured slower
    assert all(p.knobs["BLOCK_SIZE[1024]"] >= 1024 for p in proposals), [
        p.change for p in proposals
    ]
    looped = computed("_rms_norm_looped_forward", (1024, 8))
    proposals, _, _ = drive(BLOCKS_PER_ROW, narrower_is_faster, launches=looped, limit=4)
    assert any(p.knobs["BLOCK_SIZE[1024]"] < 1024 for p in proposals)


def gpu_rows_per_shape(config: dict[str, int]) -> float:
    """H200-like, two widths of one looped row kernel: each launch pays its loop trips, and
    spills past 64 values of a block per thread."""
    total = 0.0
    for key, warps, width in (("128", "num_warps[4]", 100), ("1024", "num_warps[8]", 16000)):
        block = config[f"BLOCK_SIZE[{key}]"]
        spill = 3.0 if block / (32 * config[warps]) > 64 else 1.0
        total += (10.0 * math.ceil(width / block) + block / 1024) * spill
    return total


def test_on_a_gpu_each_table_entry_is_checked_with_the_launch_it_sets():
    """Widths 100 and 16000 compute (128, 4 warps) and (1024, 8 warps). The entries of two
    shapes never run in one launch: neither multiplied as one tile (128 x 16384 is over
    Triton's element limit, 16384 alone is not) nor checked with the other shape's warps."""
    launches = computed("_rms_norm_looped_forward", (128, 4), (1024, 8))
    cases = [
        CaseSpec(case_id=f"w{n}", parameters={"n_rows": 4096, "n_cols": n}) for n in (100, 16000)
    ]
    proposals, measured, _ = drive(
        BLOCKS_PER_ROW, gpu_rows_per_shape, launches=launches, backend="cuda", cases=cases
    )
    for p in proposals:
        for key, warps in (("128", "num_warps[4]"), ("1024", "num_warps[8]")):
            assert p.knobs[f"BLOCK_SIZE[{key}]"] / (32 * p.knobs[warps]) <= 64, p.change
    best = best_of(measured).knobs
    assert best["BLOCK_SIZE[1024]"] == 16384 and best["num_warps[8]"] >= 8, best


def near(
    rank: int, knobs: dict[str, int], run_id: str = "r0", speedup: float = 5.0
) -> NearestConfig:
    """A configuration another run promoted, as nearest_history ranks it for this run."""
    renders = set(knobs) <= set(knob_values(SOFTMAX))
    return nearest_config(
        rank=rank,
        from_run_id=run_id,
        from_candidate_id=f"c00{rank}",
        source_hash=source_hashes(apply_knobs(SOFTMAX, knobs))[0] if renders else "sha256:0",
        knobs=knobs,
        speedup=speedup,
        differs="bundle: cases 1x1024 → 2x4096; same device",
    )


def test_the_first_proposals_are_the_nearest_history_then_the_search_goes_on_from_the_best():
    nearest = [near(1, {"BLOCK": 2048}), near(2, {"BLOCK": 1024, "num_warps": 4})]
    cold, cold_measured, _ = drive(SOFTMAX, interpreter_softmax)
    proposals, measured, done = drive(
        SOFTMAX, interpreter_softmax, nearest=nearest, history_seeds=2
    )
    assert [p.knobs for p in proposals[:2]] == [{"BLOCK": 2048}, {"BLOCK": 1024}]
    first = proposals[0]
    assert first.evidence.startswith("nearest history #1 (seed 1 of 2): BLOCK=2048 was promoted")
    assert "run r0, c001" in first.evidence and "bundle: cases 1x1024 → 2x4096" in first.evidence
    assert first.remeasures == "r0/c001"  # the same source, re-measured against this baseline
    assert first.change == "BLOCK 128→2048"
    # then the local search, from the best of what was measured: it reaches the cold run's best
    assert best_of(measured).knobs == best_of(cold_measured).knobs == {"BLOCK": 4096}
    assert len(proposals) <= len(cold) + 2 and isinstance(done, SearchExhausted)
    assert drive(SOFTMAX, interpreter_softmax, nearest=nearest)[0] == cold  # 0 seeds: none


def test_a_bad_seed_costs_only_itself_and_the_search_goes_on_from_the_incumbent():
    """Seeds measured worse than the baseline (a guide from another dtype, say) are rejected;
    the local search then starts from the incumbent as a cold run does."""
    nearest = [near(1, {"BLOCK": 16}), near(2, {"BLOCK": 32})]
    cold, cold_measured, _ = drive(SOFTMAX, interpreter_softmax)
    proposals, measured, _ = drive(SOFTMAX, interpreter_softmax, nearest=nearest, history_seeds=2)
    assert [p.knobs for p in proposals[:2]] == [{"BLOCK": 16}, {"BLOCK": 32}]
    assert [m.outcome for m in measured[:2]] == ["rejected", "rejected"]
    assert proposals[2].change == cold[0].change == "BLOCK 128→512"  # from the incumbent
    assert best_of(measured).knobs == best_of(cold_measured).knobs
    assert len(proposals) <= len(cold) + 2


def test_a_seed_is_skipped_when_its_knobs_do_not_render_or_it_was_measured_here():
    measured = [measured_block("r0", "c001", 2048, "rejected", 1.5, None)]  # another run
    nearest = [
        near(1, {"TILE": 64}),  # a knob this kernel does not have (an edit renamed it)
        near(2, {"BLOCK": 2048}),  # measured under this identity already
        near(3, {"BLOCK": 1024}),
    ]
    ctx = context(SOFTMAX, measured, run_id="r1", nearest=nearest, history_seeds=1)
    result = TuneProvider().propose(ctx, lambda e: None)
    assert isinstance(result, Proposal) and result.knobs == {"BLOCK": 1024}
    assert "nearest history #3 (seed 1 of 1)" in result.evidence


def test_a_new_provider_counts_the_seeds_the_run_already_holds_as_after_a_resume():
    """The seeds a run proposed are read from its candidates, not from the provider's process:
    a run resumed after its one seed (a new TuneProvider) goes on with the search, not with the
    next configuration of the nearest history."""
    nearest = [near(1, {"BLOCK": 2048}), near(2, {"BLOCK": 1024})]
    seeded = [measured_block("r1", "c001", 2048, "promoted", 9.0, (8.5, 9.5))]
    parent = apply_knobs(SOFTMAX, {"BLOCK": 2048})
    ctx = context(SOFTMAX, seeded, parent=parent, run_id="r1", nearest=nearest, history_seeds=1)
    result = TuneProvider().propose(ctx, lambda e: None)
    assert isinstance(result, Proposal) and not result.evidence.startswith("nearest history")
    two = ctx.model_copy(update={"history_seeds": 2})  # a budget of two: the second is next
    second = TuneProvider().propose(two, lambda e: None)
    assert isinstance(second, Proposal) and second.knobs == {"BLOCK": 1024}
    assert "nearest history #2 (seed 2 of 2)" in second.evidence


def test_a_step_whose_interval_holds_one_is_not_said_to_have_helped_or_hurt():
    """A new user's LayerNorm run read "256→1024 helped before (1.09x, c002)" for a rejected
    candidate whose 99% interval was 0.62-1.76: a point estimate inside the noise is no
    direction. The evidence now carries the interval of the step and says so."""
    base = knob_values(SOFTMAX)["BLOCK"]
    said = []
    for ci in [(0.62, 1.76), (1.05, 1.13), None]:
        wider = measured_block("r1", "c001", base * 2, "rejected", 1.09, ci)
        got = TuneProvider().propose(context(SOFTMAX, [wider], run_id="r1"), lambda e: None)
        assert isinstance(got, Proposal)
        said.append(got.evidence.split("measured on cpu-interpreter. ")[1])
    step = f"BLOCK {base * 2}→{base}"
    assert said == [
        f"{step} changed nothing clear before (0.917x, 99% CI 0.545-1.55, baseline).",
        f"{step} hurt before (0.917x, 99% CI 0.884-0.952, baseline).",
        f"{step} hurt before (0.917x, baseline).",  # no interval known: the point alone
    ]
