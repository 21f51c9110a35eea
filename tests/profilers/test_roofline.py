"""Devices, ceilings and the roofline, checked against the H200 numbers in docs/MEASUREMENTS.md."""

from __future__ import annotations

import pytest

from profilers.hardware import CeilingSource, Resource, known_devices, lookup_device
from profilers.roofline import Bound, implausible, roofline

SOFTMAX_BYTES = 2 * 16384 * 8192 * 2  # bf16 16384x8192 read once, written once
MATMUL_FLOPS = 2 * 4096**3
MATMUL_BYTES = 3 * 4096 * 4096 * 2


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("NVIDIA H200", "h200"),
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA A100-SXM4-80GB", "a100-80gb-sxm"),
        ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
        ("NVIDIA A100 80GB PCIe", "a100-80gb-pcie"),
        ("cpu", "cpu"),
        ("NVIDIA Future GPU", "unknown"),
    ],
)
def test_lookup_by_runtime_name(name, key):
    spec = lookup_device(name)
    assert spec.key == key
    assert spec.name == name


def test_h200_is_judged_against_measured_ceilings_and_limited_by_the_datasheet():
    h200 = lookup_device("NVIDIA H200")
    assert (h200.sm_count, h200.compute_capability) == (132, "9.0")
    bw = h200.ceiling(Resource.DRAM_BANDWIDTH)
    assert bw is not None and (bw.value, bw.source) == (4.24e12, CeilingSource.MEASURED)
    assert h200.ceiling(Resource.BF16_DENSE).value == 765e12  # type: ignore[union-attr]
    limit = h200.hard_limit(Resource.DRAM_BANDWIDTH)
    assert limit is not None and (limit.value, limit.source) == (4.8e12, CeilingSource.DATASHEET)


def test_devices_without_measurements_use_datasheet_and_cpu_has_none():
    h100 = lookup_device("NVIDIA H100 80GB HBM3")
    assert h100.ceiling(Resource.DRAM_BANDWIDTH).source == CeilingSource.DATASHEET  # type: ignore[union-attr]
    cpu = lookup_device("cpu")
    assert (
        cpu.ceiling(Resource.DRAM_BANDWIDTH) is None and cpu.hard_limit(Resource.BF16_DENSE) is None
    )
    assert all(c.value > 0 for d in known_devices() for c in d.ceilings)


def test_tuned_softmax_reaches_95_percent_of_the_copy_ceiling():
    # docs/MEASUREMENTS.md: the best num_warps reached 4.04 TB/s
    time_us = SOFTMAX_BYTES / 4.04e12 * 1e6
    point = roofline(lookup_device("NVIDIA H200"), time_us, bytes_moved=SOFTMAX_BYTES)
    assert point.achieved_bytes_per_s == pytest.approx(4.04e12)
    assert point.bandwidth_fraction == pytest.approx(4.04 / 4.24)
    # no flops declared: at 95% of the bandwidth ceiling nothing else can bind it
    assert point.compute_fraction is None and point.bound == Bound.MEMORY


def test_with_one_amount_only_a_kernel_far_from_that_ceiling_has_an_unknown_bound():
    h200 = lookup_device("NVIDIA H200")
    slow = roofline(h200, SOFTMAX_BYTES / 1.0e12 * 1e6, bytes_moved=SOFTMAX_BYTES)
    assert slow.bandwidth_fraction == pytest.approx(1.0 / 4.24) and slow.bound == Bound.UNKNOWN
    busy = roofline(h200, MATMUL_FLOPS / 600e12 * 1e6, flops=MATMUL_FLOPS)
    assert busy.bytes_moved is None and busy.bound == Bound.COMPUTE
    idle = roofline(h200, MATMUL_FLOPS / 100e12 * 1e6, flops=MATMUL_FLOPS)
    assert idle.bound == Bound.UNKNOWN


def test_matmul_is_compute_bound_and_a_copy_is_memory_bound():
    h200 = lookup_device("NVIDIA H200")
    mm = roofline(h200, MATMUL_FLOPS / 741e12 * 1e6, bytes_moved=MATMUL_BYTES, flops=MATMUL_FLOPS)
    assert mm.bound == Bound.COMPUTE
    assert mm.compute_fraction == pytest.approx(741 / 765)
    assert mm.ridge_intensity == pytest.approx(765e12 / 4.24e12)
    add = roofline(h200, 50.368, bytes_moved=3 * 2**26, flops=2**24)
    assert add.bound == Bound.MEMORY
    names = {m.name: m.value for m in add.metrics()}
    assert names["bandwidth_fraction"] == pytest.approx(3 * 2**26 / 50.368e-6 / 4.24e12)


def test_throughput_above_the_hardware_is_implausible():
    h200 = lookup_device("NVIDIA H200")
    too_fast = SOFTMAX_BYTES / 6.0e12 * 1e6
    (flag,) = implausible(h200, too_fast, bytes_moved=SOFTMAX_BYTES)
    assert flag.resource == Resource.DRAM_BANDWIDTH and flag.ratio == pytest.approx(6.0 / 4.8)
    assert "datasheet" in flag.message
    above_measured_only = SOFTMAX_BYTES / 4.5e12 * 1e6
    assert implausible(h200, above_measured_only, bytes_moved=SOFTMAX_BYTES) == []
    (flops_flag,) = implausible(h200, 1.0, flops=2e9)  # 2 PFLOP/s
    assert flops_flag.resource == Resource.BF16_DENSE


def test_what_cannot_be_judged_is_not_flagged():
    assert implausible(lookup_device("cpu"), 1e-3, bytes_moved=1e12) == []
    assert implausible(lookup_device("NVIDIA Future GPU"), 1e-3, bytes_moved=1e12) == []
    assert implausible(lookup_device("NVIDIA H200"), 1.0) == []


def test_time_must_be_positive():
    with pytest.raises(ValueError):
        roofline(lookup_device("NVIDIA H200"), 0.0, bytes_moved=1.0)
    with pytest.raises(ValueError):
        implausible(lookup_device("NVIDIA H200"), -1.0, bytes_moved=1.0)
