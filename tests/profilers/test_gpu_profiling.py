"""Proton and ncu on a real Triton kernel. Needs a CUDA GPU; skipped cleanly without one.

Run: python -m pytest tests/profilers -m gpu
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

SCRIPT = Path(__file__).parent / "gpu_vector_add.py"
NCU_CANNOT_PROFILE_HERE = (
    "LibraryNotLoaded",
    "ERR_NVGPUCTRPERM",
    "Failed to initialize the profiler",
)


def _kernel_module():
    spec = importlib.util.spec_from_file_location("gpu_vector_add", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_proton_attributes_a_triton_kernel_and_the_roofline_judges_it(tmp_path):
    from profilers import proton
    from profilers.hardware import Resource, lookup_device
    from profilers.normalize import normalize
    from profilers.roofline import implausible, roofline

    vadd = _kernel_module()
    x, y, out = vadd.inputs()
    vadd.launch(x, y, out)  # compile outside the profile
    torch.cuda.synchronize()

    def run() -> None:
        for _ in range(5):
            vadd.launch(x, y, out)

    result = proton.collect(run, tmp_path / "artifacts")
    assert torch.equal(out, x + y)
    summary = normalize(result)
    assert summary.kernel_names[0] == "add_kernel", summary.diagnostics
    share = summary.attribution[0]
    assert share.count == 5 and share.time_us is not None and share.time_us > 0
    assert share.fraction is not None and share.fraction > 0.99
    hatchet = Path(summary.artifacts[0])
    assert hatchet.is_absolute() and hatchet.suffix == ".hatchet" and hatchet.is_file()

    device = lookup_device(torch.cuda.get_device_name())
    per_launch_us = share.time_us / share.count
    point = roofline(device, per_launch_us, bytes_moved=vadd.BYTES_MOVED, flops=vadd.N)
    assert implausible(device, per_launch_us, bytes_moved=vadd.BYTES_MOVED, flops=vadd.N) == []
    if device.ceiling(Resource.DRAM_BANDWIDTH) is not None:
        assert point.bandwidth_fraction is not None and 0.2 < point.bandwidth_fraction < 1.15
        assert point.bound.value == "memory"


@pytest.mark.skipif(shutil.which("ncu") is None, reason="ncu is not on PATH")
def test_ncu_reads_counters_of_a_triton_kernel(tmp_path):
    from profilers import ncu

    vadd = _kernel_module()
    run = ncu.run(
        [sys.executable, str(SCRIPT)],
        tmp_path / "artifacts",
        timeout_s=300,
        kernel_regex="add_kernel",
        launch_skip=1,
        launch_count=1,
    )
    raw = (
        Path(run.artifacts["stdout"]).read_text()
        + Path(run.artifacts.get("csv", run.artifacts["stdout"])).read_text()
    )
    if not run.report.launches and any(reason in raw for reason in NCU_CANNOT_PROFILE_HERE):
        pytest.skip(f"ncu cannot read counters on this machine: {run.summary().diagnostics}")
    assert run.returncode == 0, raw[-2000:]
    summary = run.summary()
    assert summary.kernel_names == ["add_kernel"], summary.diagnostics
    duration = summary.metric("gpu__time_duration.sum")
    assert duration is not None and duration.value is not None and duration.value > 0
    read = summary.metric("dram__bytes_read.sum")
    write = summary.metric("dram__bytes_write.sum")
    assert (
        read is not None
        and read.value is not None
        and write is not None
        and write.value is not None
    )
    assert 0.9 * 2 * vadd.N * 4 < read.value < 1.2 * 2 * vadd.N * 4
    # Writes can end the kernel dirty in L2 (write-back, 60 MB on the H200): on an H200 ncu
    # counted 46.4 MB of the 67.1 MB written.
    assert 0.5 * vadd.N * 4 < write.value < 1.2 * vadd.N * 4
    memory_pct = summary.metric("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed")
    assert memory_pct is not None and memory_pct.value is not None and 0 < memory_pct.value <= 100
