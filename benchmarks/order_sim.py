"""Which turn order keeps a clock swing in step with the calls off one member? A/A decisions of
benchmarks/noise_sim.py (the loop's policy, second window included) under several turn orders.

    python benchmarks/order_sim.py [--trials 500] [--seed 11]

Issue 27's GEMM A/A windows on the H200 ran the candidate's calls 4-5 and 8-9 1-2% slow
(benchmarks/README.md, figure `first_window_calls`) under tlxdb's turn order of then (A B, B A,
A B ... for two members), whose calls run A B B A A B B A ...: anything that repeats every four
calls lands on one member. Models (noise_sim's, with its 1% CV per sample):
- every 4th call 10% / 2%: the 4th, 8th ... call of a window (both sides counted) that much slow
  (noise_sim's "every 4th call" at 10%; 2% is about what the H200 showed after the warm-up);
- 4-call swing 2%: calls 4k and 4k+1 2% slow (the H200's pattern: two calls slow, two fast);
- lognormal, drift, bimodal: noise_sim's, to see that the order costs nothing elsewhere.
Orders:
- rotation: turned by one place per block, the order of then;
- halves: tlxdb's window.order now: two members A B in the first half of a window's first
  blocks, B A in the second (calls A B A B A B B A B A B A), then the rotation;
- thue-morse: turn t of the members' rotations runs forward when the Thue-Morse bit of t is 0
  and backward when it is 1 (two members: A B, B A | B A, A B | B A, A B | A B, B A ...), so the
  calls run A B B A B A A B ...: balanced over 8 blocks, but a window of two members has 6 (three
  turns: A B B A B A A B B A A B), and the swing's slow calls 4, 5, 8, 9, 12 fall once on A and
  four times on B;
- thue-morse, even turns: the same with each window's blocks rounded up to an even number of
  turns (8 blocks for two members instead of 6, 12 for a second window's six instead of 6): the
  slow calls then fall alike on both; the price is the blocks;
- random turns: each turn forward or backward at random (a new draw per turn and window), as
  noise_sim's "random order" model does.
Prints, per model and order, the share of A/A decisions promoted, of 99% intervals that exclude
1.0, and the median A/A speedup (above 1: the candidate reads fast). A simulation on the CPU,
not a measurement of a GPU.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from optimizer.evaluation import window  # noqa: E402

_spec = importlib.util.spec_from_file_location("noise_sim", HERE / "noise_sim.py")
assert _spec is not None and _spec.loader is not None
noise_sim = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(noise_sim)

T = TypeVar("T")
ORDER = window.order  # tlxdb's: halves for two members


def rotation(members: Sequence[T], block: int, first: int) -> list[T]:
    """tlxdb's order before halves: turned by one place per block, two members too."""
    return window.turned(members, block)


def thue_morse(members: Sequence[T], block: int, first: int) -> list[T]:
    """The rotations of `members`, turn t forward or backward by the Thue-Morse bit of t."""
    n = len(members)
    turn, k = divmod(block, n)
    if bin(turn).count("1") % 2:
        k = n - 1 - k
    return window.turned(members, k)


class RandomTurns:
    """Each turn of a window forward or backward at random; a new window (a block number lower
    than the last one asked) draws anew. Called once per case and block, like window.order."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.backward: dict[int, bool] = {}
        self.last = -1

    def __call__(self, members: Sequence[T], block: int, first: int) -> list[T]:
        if block < self.last:
            self.backward = {}
        self.last = block
        n = len(members)
        turn, k = divmod(block, n)
        if self.backward.setdefault(turn, bool(self.rng.random() < 0.5)):
            k = n - 1 - k
        return window.turned(members, k)


FIRST_BLOCKS = window.first_blocks


def even_turns(repetitions: int, members: int) -> int:
    """window.first_blocks rounded up to an even number of turns."""
    blocks = FIRST_BLOCKS(repetitions, members)
    return blocks + members * ((blocks // members) % 2)


# label -> (turn order, first blocks of a window)
ORDERS: dict[
    str, tuple[Callable[[Sequence[Any], int, int], list[Any]], Callable[[int, int], int]]
] = {
    "rotation": (rotation, FIRST_BLOCKS),
    "halves": (ORDER, FIRST_BLOCKS),
    "thue-morse": (thue_morse, FIRST_BLOCKS),
    "thue-morse, even turns": (thue_morse, even_turns),
    "random turns": (RandomTurns(5), FIRST_BLOCKS),
}
MODELS = {
    "every 4th call 10%": {"cv": 0.01, "every_call": 4, "slow_call": 1.1},
    "every 4th call 2%": {"cv": 0.01, "every_call": 4, "slow_call": 1.02},
    "4-call swing 2%": {"cv": 0.01, "swing": 1.02},
    "lognormal": noise_sim.MODELS["lognormal"],
    "drift": noise_sim.MODELS["drift"],
    "bimodal": noise_sim.MODELS["bimodal"],
}
_call = noise_sim._Sampler.call


def _swinging(self: Any, case: str, n: int, shared: float, nth: int = 1) -> list[float]:
    """noise_sim's call, calls 4k and 4k+1 of a window `swing` times slower where the model
    has one."""
    slow = self.m.get("swing", 1.0) if nth % 4 in (0, 1) and nth > 1 else 1.0
    return _call(self, case, n, shared * slow, nth)


def rates(
    model: dict, order: Callable, trials: int, seed: int, blocks: Callable = FIRST_BLOCKS
) -> tuple[float, float, float]:
    """(promoted, 99% interval excluding 1.0, median speedup) over `trials` A/A decisions,
    noise_sim's windows turned by `order` over `blocks` and its calls swinging where the model
    says so."""
    window.order, window.first_blocks = order, blocks  # what noise_sim's windows use
    noise_sim._Sampler.call = _swinging
    try:
        rng = np.random.default_rng(seed)
        got = [noise_sim.trial(model, rng, 1.0) for _ in range(trials)]
    finally:
        window.order, window.first_blocks = ORDER, FIRST_BLOCKS
        noise_sim._Sampler.call = _call
    promoted, excluding = sum(g[0] for g in got) / trials, sum(g[1] for g in got) / trials
    return promoted, excluding, float(np.median([g[2] for g in got]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=500)
    ap.add_argument("--seed", type=int, default=11)
    args = ap.parse_args(argv)
    print(f"A/A decisions per model and order: {args.trials} (simulated on the CPU)")
    for name, model in MODELS.items():
        for label, (order, blocks) in ORDERS.items():
            promoted, excluding, median = rates(model, order, args.trials, args.seed, blocks)
            print(
                f"{name:20s} {label:22s} promoted {promoted:.3f}  excluding 1.0 {excluding:.3f}"
                f"  median speedup {median:.4f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
