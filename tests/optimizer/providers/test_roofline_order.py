"""The roofline hook of the tune provider: wider blocks first when a memory-bound kernel is far
from the bandwidth ceiling, more warps last when registers spill, history always first."""

from __future__ import annotations

from optimizer.decision.kernel import KernelEvidence
from optimizer.providers import roofline_order
from optimizer.providers.knobs import KnobRole

ROLES = {"BLOCK": KnobRole.BLOCK, "num_warps": KnobRole.WARPS}
CENTER = {"BLOCK": 256, "num_warps": 4}
# (name, rank, config): tune's own ranks; the two first-class moves tie on their class
MOVES = [
    ("more warps", (1, 1, -1), {"BLOCK": 256, "num_warps": 8}),
    ("wider", (1, 0, -1), {"BLOCK": 512, "num_warps": 4}),
    ("narrower", (1, 0, 1), {"BLOCK": 128, "num_warps": 4}),
    ("known good", (0, -0.3), {"BLOCK": 256, "num_warps": 2}),
]


def ordered(evidence: list[KernelEvidence]) -> list[str]:
    moves = roofline_order.order(MOVES, lambda m: m[1], lambda m: m[2], CENTER, ROLES, evidence)
    return [m[0] for m in moves]


def test_without_evidence_tunes_own_order_stands():
    assert ordered([]) == ["known good", "wider", "narrower", "more warps"]


def test_a_memory_bound_kernel_far_from_the_ceiling_tries_wider_blocks_first():
    far = KernelEvidence(case_id="a", bound="memory", bandwidth_fraction=0.6)
    assert ordered([far]) == ["known good", "wider", "narrower", "more warps"]
    # with warps ranked first by tune, the roofline still puts the wider block ahead of them
    moves = [MOVES[0], ("wider", (1, 2, -1), MOVES[1][2])]
    out = roofline_order.order(moves, lambda m: m[1], lambda m: m[2], CENTER, ROLES, [far])
    assert [m[0] for m in out] == ["wider", "more warps"]
    near = KernelEvidence(case_id="a", bound="memory", bandwidth_fraction=0.95)
    out = roofline_order.order(moves, lambda m: m[1], lambda m: m[2], CENTER, ROLES, [near])
    assert [m[0] for m in out] == ["more warps", "wider"]


def test_register_spills_put_more_warps_last_within_its_class():
    spilling = KernelEvidence(
        case_id="a", deep={"smsp__sass_inst_executed_op_local_st.sum": 1024.0}
    )
    moves = [("more warps", (1, 0, -1), MOVES[0][2]), ("narrower", (1, 1, 1), MOVES[2][2])]
    out = roofline_order.order(moves, lambda m: m[1], lambda m: m[2], CENTER, ROLES, [spilling])
    assert [m[0] for m in out] == ["narrower", "more warps"]
