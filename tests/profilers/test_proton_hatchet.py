"""Reading Proton .hatchet trees (shape: see data/README.md) and collecting one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profilers import proton
from profilers.metrics import MetricSource
from profilers.normalize import normalize

DATA = Path(__file__).parent / "data"
HATCHET = DATA / "softmax_h200.hatchet"
FILL = "void at::native::vectorized_elementwise_kernel"


def test_kernel_time_is_summed_across_scopes_and_launches():
    profile = proton.read_hatchet(HATCHET)
    softmax = next(k for k in profile.kernels if k.name == "softmax_kernel")
    assert softmax.count == 12
    assert softmax.time_us == pytest.approx(1595.0)
    assert softmax.fraction == pytest.approx(1595.0 / 1666.0)
    assert profile.total_time_us == pytest.approx(1666.0)
    assert profile.launches == 13
    assert profile.kernels[0].name == "softmax_kernel"  # heaviest first
    assert profile.diagnostics == []


def test_kernels_of_protons_own_launch_hook_are_not_attributed():
    names = proton.read_hatchet(HATCHET).summary().kernel_names
    assert "cuda_kernel" not in names
    assert names[0] == "softmax_kernel" and names[1].startswith(FILL)


def test_scope_nodes_and_root_are_not_kernels():
    names = proton.read_hatchet(HATCHET).summary().kernel_names
    assert not {"ROOT", "benchmark", "verify"} & set(names)


def test_real_h200_capture_gives_time_per_launch():
    """Proton (triton 3.6, hook="triton") on an H200: 20 launches of gpu_vector_add.py."""
    profile = proton.read_hatchet(DATA / "proton_h200_vector_add.hatchet")
    (share,) = profile.kernels
    assert (share.name, share.count, share.fraction) == ("add_kernel", 20, 1.0)
    assert share.time_us == pytest.approx(953.086)
    (device,) = profile.devices
    assert (device.arch, device.num_sms, device.bus_width_bits) == ("90", 132, 6016)
    assert device.memory_clock_rate_khz == 3201000


def test_device_record_is_read():
    (device,) = proton.read_hatchet(HATCHET).devices
    assert (device.device_type, device.device_id, device.arch, device.num_sms) == (
        "CUDA",
        "0",
        "90",
        132,
    )
    assert device.clock_rate_khz == 1980000 and device.bus_width_bits == 6144


def test_summary_metrics_are_proton_metrics_in_microseconds():
    summary = proton.read_hatchet(HATCHET).summary(artifacts=[str(HATCHET)])
    total = summary.metric("kernel_time_us")
    assert total is not None and total.value == pytest.approx(1666.0) and total.unit == "us"
    assert total.source == MetricSource.PROTON
    per_kernel = summary.metric("kernel_time_us:softmax_kernel")
    assert per_kernel is not None and per_kernel.value == pytest.approx(1595.0)
    assert summary.artifacts == [str(HATCHET)]


def test_unreadable_time_is_unknown_not_zero():
    tree = json.loads(HATCHET.read_text())
    tree[0]["children"][1]["children"][0]["metrics"]["time (ns)"] = "garbage"
    profile = proton.parse_hatchet(tree)
    softmax = next(k for k in profile.kernels if k.name == "softmax_kernel")
    assert softmax.time_us is None
    assert profile.total_time_us is None
    assert all(k.fraction is None for k in profile.kernels)
    assert any("unreadable time" in d for d in profile.diagnostics)
    assert profile.summary().metric("kernel_time_us").value is None  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "cannot read"),
        ("{not json", "cannot read"),
        ("42", "a hatchet tree is a list"),
        ('[{"frame": {"name": "ROOT"}, "metrics": {}, "children": "oops"}]', "is not a list"),
    ],
)
def test_odd_files_give_diagnostics_not_errors(tmp_path, content, expected):
    path = tmp_path / "p.hatchet"
    if content is not None:
        path.write_text(content)
    profile = proton.read_hatchet(path)
    assert profile.kernels == []
    assert any(expected in d for d in profile.diagnostics)
    assert proton.NO_KERNEL in profile.summary().diagnostics


def test_compact_result_round_trips_through_normalize():
    compact = {"proton": proton.read_hatchet(HATCHET).compact(str(HATCHET))}
    json.dumps(compact)  # it is plain JSON
    summary = normalize(compact)
    assert summary.kernel_names[0] == "softmax_kernel"
    assert summary.attribution[0].fraction == pytest.approx(1595.0 / 1666.0)
    assert summary.metric("kernel_time_us", MetricSource.PROTON).value == pytest.approx(1666.0)  # type: ignore[union-attr]
    assert summary.metric("kernel_launches").unit == "count"  # type: ignore[union-attr]
    assert summary.artifacts == [str(HATCHET)]


def test_collect_without_a_gpu_reports_why_and_no_numbers(tmp_path):
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this test is about a machine without a GPU driver")
    ran = []
    result = proton.collect(lambda: ran.append(1), tmp_path / "artifacts")
    section = result["proton"]
    assert section["kernel_time_us"] is None and section["kernels"] == []
    assert any("could not start" in d for d in section["diagnostics"])
    assert ran == []  # nothing was run outside a profile
