"""Launch attribution from a Proton tree: the main kernel, per-launch time, null when unavailable."""

from __future__ import annotations

from pathlib import Path

from optimizer.evaluation import attribution
from optimizer.reporting.live import describe
from profilers import proton
from tlxstore.events import Envelope
from tlxstore.fold import RunState

DATA = Path(__file__).parents[2] / "profilers" / "data"

SOFTMAX = """
import triton
import triton.language as tl

@triton.jit
def softmax_kernel(x_ptr, y_ptr, n):
    pass

@triton.autotune(configs=[], key=[])
@triton.jit
def other_kernel(x):
    pass

def softmax(x):
    return x
"""


def test_kernel_functions_are_the_decorated_ones_in_source_order():
    assert attribution.kernel_functions(SOFTMAX) == ["softmax_kernel", "other_kernel"]
    assert attribution.kernel_functions("def (") == []


def test_the_main_kernel_is_the_candidates_own_heaviest_even_under_a_heavier_harness_kernel():
    kernels = [
        {"name": "flush_l2", "count": 1, "time_us": 500.0},
        {"name": "softmax_kernel", "count": 4, "time_us": 400.0},
    ]
    assert attribution.main_kernel(kernels, ["softmax_kernel"])["name"] == "softmax_kernel"
    assert attribution.main_kernel(kernels, [])["name"] == "flush_l2"
    assert attribution.main_kernel([], ["softmax_kernel"]) is None


def test_an_h200_proton_tree_becomes_per_launch_attribution_with_the_main_kernel_first():
    section = proton.read_hatchet(DATA / "softmax_h200.hatchet").compact("/tmp/p.hatchet")
    reply = {"ok": True, "available": True, "result": section, "wall_ms": 412.0}
    e = attribution.attribution_event(
        "c001", "16384x8192", reply, attribution.kernel_functions(SOFTMAX)
    )
    metrics = {m.name: m for m in e.metrics}
    assert e.kernel_names[0] == "softmax_kernel" and len(e.kernel_names) == 2
    assert abs(metrics[attribution.MAIN_TIME].value - 1595.0 / 12) < 1e-9
    assert metrics["kernel_launches:softmax_kernel"].value == 12
    assert metrics[attribution.PROFILING_WALL].value == 412.0
    assert all(m.source == "proton" for m in e.metrics)
    assert attribution.main_kernel_of(e) == "softmax_kernel"
    assert e.artifacts == ["/tmp/p.hatchet"]


def test_unavailable_proton_is_a_warning_in_the_live_log_and_a_null_never_a_zero():
    e = attribution.unavailable_event(
        "baseline", "small", "Proton is unavailable on this target: no GPU is visible"
    )
    assert [m.value for m in e.metrics] == [None]
    assert attribution.main_kernel_of(e) is None
    env = Envelope(
        event_id="0" * 32, run_id="r", seq=0, recorded_at="2026-12-01T00:00:00Z", event=e
    )
    line = describe(env, RunState())
    assert line is not None and "WARNING" in line and "unavailable on this target" in line
