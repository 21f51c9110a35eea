"""The plan of a measurement window: pure functions."""

from __future__ import annotations

from collections import Counter

import pytest

from optimizer.evaluation import window


@pytest.mark.parametrize(
    ("repetitions", "members", "blocks"),
    [(10, 1, 5), (10, 2, 6), (10, 3, 6), (5, 2, 4), (8, 2, 4), (1, 2, 2), (3, 3, 3)],
)
def test_first_blocks_ask_the_repetitions_in_whole_turns(repetitions, members, blocks):
    assert window.first_blocks(repetitions, members) == blocks
    assert blocks * window.per_call(repetitions) >= repetitions


@pytest.mark.parametrize("members", [["c001", "baseline"], ["c001", "baseline", "c004"]])
def test_in_whole_turns_every_member_is_first_second_and_last_as_often_as_every_other(members):
    blocks = window.first_blocks(10, len(members))
    places = Counter(
        (m, i) for b in range(blocks) for i, m in enumerate(window.order(members, b, blocks))
    )
    assert len(set(places.values())) == 1, places


def _calls(members: list[str], blocks: int, first: int) -> list[str]:
    return [m for b in range(blocks) for m in window.order(members, b, first)]


def test_two_members_run_a_b_then_b_a_so_a_four_call_swing_weighs_on_both():
    """The rotation (A B, B A, ...) ran A B B A A B B A A B B A: calls 4k and 4k+1 (of any
    phase) all on one member. The halves put at most 4 of those 6 on one, and a linear drift and
    a swing of 2, 3 or 6 calls on both alike."""
    calls = _calls(["A", "B"], 6, 6)
    assert "".join(calls) == "ABABABBABABA"
    for period, slow in [(2, 1), (3, 1), (3, 2), (4, 2), (6, 3)]:
        for phase in range(period):
            on = [m for i, m in enumerate(calls) if (i - phase) % period < slow]
            bound = 2 if period == 4 else 0
            assert abs(on.count("A") - on.count("B")) <= bound, (period, slow, phase, on)
    assert sum(i for i, m in enumerate(calls) if m == "A") == sum(
        i for i, m in enumerate(calls) if m == "B"
    )  # a linear drift: the same weight on both


def test_extra_blocks_and_more_members_turn_by_one_place():
    assert "".join(_calls(["A", "B"], 10, 6)[12:]) == "ABBAABBA"
    assert "".join(_calls(["A", "B"], 2, 2)) == "ABBA"
    assert _calls(["A", "B", "C"], 3, 3) == list("ABCBCACAB")


def test_extra_turns_are_whole_turns_within_the_limit():
    assert window.extra_turns(6, 1) == 6
    assert window.extra_turns(6, 2) == 3
    assert window.extra_turns(6, 3) == 2
    assert window.extra_turns(1, 2) == 0


def test_a_case_is_noisy_when_any_member_s_samples_are():
    samples = {"c001": {"a": [1.0, 1.0], "b": [1.0, 2.0]}, "baseline": {"a": [1.0, 3.0]}}
    assert window.noisy_cases(samples, ["a", "b", "c"], 0.1) == ["a", "b"]
    assert window.noisy_cases(samples, ["a", "b"], 1.0) == []
