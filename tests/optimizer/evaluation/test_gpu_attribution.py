"""tlxdb's own launch attribution in a real harness child on a GPU. Skipped without one.

Run: python -m pytest tests/optimizer/evaluation -m gpu
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from optimizer.bundle.spec import CaseSpec
from optimizer.evaluation.attribution import MAIN_TIME, is_attribution
from optimizer.evaluation.evaluator import Evaluator
from optimizer.evaluation.requests import EvalRequest, HarnessBundle
from tlxstore.events import ProfileCollected, ProfilingFinished

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

KERNEL = (Path(__file__).parents[2] / "profilers" / "gpu_vector_add.py").read_text()

# A harness whose benchmark refuses a single repetition (it computes a spread): attribution
# cannot run it under Proton and falls back to a verify call.
HARNESS = textwrap.dedent(
    """
    import importlib.util, os, tempfile
    import torch
    import triton

    def build(kernel_source, target):
        path = os.path.join(tempfile.mkdtemp(), "candidate.py")
        open(path, "w").write(kernel_source)
        spec = importlib.util.spec_from_file_location("candidate", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    def verify(mod, case):
        x, y, out = mod.inputs()
        mod.launch(x, y, out)
        return bool(torch.equal(out, x + y))

    def benchmark(mod, case, repetitions):
        if repetitions < 2:
            raise ValueError("this benchmark needs at least 2 repetitions for its spread")
        x, y, out = mod.inputs()
        return [triton.testing.do_bench(lambda: mod.launch(x, y, out)) * 1e3
                for _ in range(repetitions)]
    """
)


def test_attribution_falls_back_to_verify_when_the_benchmark_cannot_run_under_proton(tmp_path):
    root = tmp_path / "bundle"
    root.mkdir()
    (root / "harness.py").write_text(HARNESS)
    bundle = HarnessBundle(
        root=root, cases=[CaseSpec(case_id="v", parameters={})], target={"backend": "cuda"}
    )
    events: list = []
    summary = Evaluator(bundle).evaluate(
        EvalRequest(candidate_id="c001", source=KERNEL, repetitions=3, timeout_s=300),
        events.append,
    )
    assert summary.benchmarked, summary
    (attr,) = [e for e in events if isinstance(e, ProfileCollected) and is_attribution(e)]
    main = {m.name: m.value for m in attr.metrics}[MAIN_TIME]
    assert attr.kernel_names[0] == "add_kernel" and main is not None and main > 0
    assert attr.diagnostics.startswith("attributed over verify; benchmark(artifact, case, 1)")
    assert "needs at least 2 repetitions" in attr.diagnostics
    (phase,) = [e for e in events if isinstance(e, ProfilingFinished)]
    assert phase.tool == "proton" and phase.cases == 1 and 0 < phase.wall_ms == phase.waited_ms
