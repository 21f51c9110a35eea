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
    places = Counter((m, i) for b in range(blocks) for i, m in enumerate(window.order(members, b)))
    assert len(set(places.values())) == 1, places


def test_extra_turns_are_whole_turns_within_the_limit():
    assert window.extra_turns(6, 1) == 6
    assert window.extra_turns(6, 2) == 3
    assert window.extra_turns(6, 3) == 2
    assert window.extra_turns(1, 2) == 0


def test_a_case_is_noisy_when_any_member_s_samples_are():
    samples = {"c001": {"a": [1.0, 1.0], "b": [1.0, 2.0]}, "baseline": {"a": [1.0, 3.0]}}
    assert window.noisy_cases(samples, ["a", "b", "c"], 0.1) == ["a", "b"]
    assert window.noisy_cases(samples, ["a", "b"], 1.0) == []
