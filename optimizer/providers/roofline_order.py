"""The roofline's word on which knob moves to try first (a hook the tune provider calls).

From the parent's kernel-level evidence (ProviderContext.parent_kernel):
- memory-bound and far from the bandwidth ceiling (below FAR_FROM_CEILING on some case): moves
  that widen a block come first (fewer, longer memory streams per program; fewer loop trips);
- register spills (local-memory loads or stores in the deep ncu set): moves that add warps come
  last (more warps leave fewer registers to each thread).

The hook only reorders within tune's own rank classes (the first element of a move's rank): what
the measured history says about a direction always outranks the roofline.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from optimizer.decision.kernel import KernelEvidence
from optimizer.providers.knobs import KnobRole

FAR_FROM_CEILING = 0.8
SPILL_METRICS = (
    "smsp__sass_inst_executed_op_local_ld.sum",
    "smsp__sass_inst_executed_op_local_st.sum",
)
PREFERRED, NEUTRAL, DISCOURAGED = 0, 1, 2

M = TypeVar("M")


def wants_wider_blocks(evidence: Sequence[KernelEvidence]) -> bool:
    return any(
        e.bound == "memory"
        and e.bandwidth_fraction is not None
        and e.bandwidth_fraction < FAR_FROM_CEILING
        for e in evidence
    )


def spills(evidence: Sequence[KernelEvidence]) -> bool:
    return any((e.deep.get(m) or 0.0) > 0 for e in evidence for m in SPILL_METRICS)


def preference(
    config: Mapping[str, int],
    center: Mapping[str, int],
    roles: Mapping[str, KnobRole],
    evidence: Sequence[KernelEvidence],
) -> int:
    """PREFERRED, NEUTRAL or DISCOURAGED for the move from `center` to `config`."""
    up = {n for n, v in config.items() if n in center and v > center[n]}
    if spills(evidence) and any(roles.get(n) == KnobRole.WARPS for n in up):
        return DISCOURAGED
    if wants_wider_blocks(evidence) and any(roles.get(n) == KnobRole.BLOCK for n in up):
        return PREFERRED
    return NEUTRAL


def order(
    moves: Sequence[M],
    rank: Callable[[M], tuple],
    config: Callable[[M], Mapping[str, int]],
    center: Mapping[str, int],
    roles: Mapping[str, KnobRole],
    evidence: Sequence[KernelEvidence],
) -> list[M]:
    """`moves` sorted by (rank class, roofline preference, the rest of the rank)."""
    if not evidence:
        return sorted(moves, key=rank)
    return sorted(
        moves,
        key=lambda m: (
            rank(m)[:1],
            preference(config(m), center, roles, evidence),
            rank(m)[1:],
        ),
    )
