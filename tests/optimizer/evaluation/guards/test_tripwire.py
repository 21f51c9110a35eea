"""Tripwires: implausible measurements are named, plausible ones are not."""

from __future__ import annotations

from optimizer.evaluation.guards.tripwire import check


def test_more_than_10x_over_the_parent_trips_and_10x_does_not():
    assert check({"a": 9.0}, {"a": 100.0}, {}, None, None)[0].guard == "tripwire:speedup>10x"
    assert check({"a": 10.0}, {"a": 100.0}, {}, None, None) == []
    assert check({"a": 1.0}, {}, {}, None, None) == []  # no parent measurement: nothing to judge


def test_throughput_above_the_ceiling_trips_for_bytes_and_flops():
    # 4 GB in 1000 us = 4 TB/s; 1e12 FLOP in 1000 us = 1 PFLOP/s
    declared = {"a": (4_000_000_000, 1_000_000_000_000)}
    fired = check({"a": 1000.0}, {}, declared, 3.0e12, 0.5e15)
    assert [t.guard for t in fired] == ["tripwire:bandwidth>ceiling", "tripwire:flops>ceiling"]
    assert "exceeds the hardware ceiling" in fired[0].detail
    assert check({"a": 1000.0}, {}, declared, 5.0e12, 2.0e15) == []
    assert check({"a": 1000.0}, {}, {"a": (None, None)}, 1.0, 1.0) == []
