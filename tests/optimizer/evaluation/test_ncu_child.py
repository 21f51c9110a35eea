"""The ncu child: a harness child started under ncu (here a stand-in executable that runs the
program and then writes a recorded H200 CSV, as ncu does when the program ends), talking over
FIFOs, profiling one launch of the main kernel per case, prestarted for the next candidate."""

from __future__ import annotations

import stat
import sys
import textwrap
from pathlib import Path

from optimizer.bundle.spec import CaseSpec
from optimizer.decision.kernel import Level
from optimizer.evaluation import ncu_child
from optimizer.evaluation.evaluator import Evaluator
from optimizer.evaluation.ncu_child import NcuProfiler
from optimizer.evaluation.requests import HarnessBundle
from profilers import ncu

DATA = Path(__file__).parents[2] / "profilers" / "data"

KERNEL = textwrap.dedent(
    """
    import triton
    import triton.language as tl

    @triton.jit
    def add_kernel(x_ptr, n):
        pass

    def add(x, y):
        return x + y
    """
)

# The CPU interpreter makes no launch Triton's launch hooks see, so this harness calls them
# around each call of the kernel as a GPU launch of add_kernel would.
HARNESS = textwrap.dedent(
    """
    import importlib.util, os, tempfile, time
    import torch
    from triton import knobs

    def build(kernel_source, target):
        path = os.path.join(tempfile.mkdtemp(), "candidate.py")
        open(path, "w").write(kernel_source)
        spec = importlib.util.spec_from_file_location("candidate", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    def _launch(mod, x):
        meta = {"name": "add_kernel"}
        knobs.runtime.launch_enter_hook(meta)
        t0 = time.perf_counter()
        mod.add(x, x)
        knobs.runtime.launch_exit_hook(meta)
        return (time.perf_counter() - t0) * 1e6 + 1.0

    def verify(mod, case):
        _launch(mod, torch.ones(case["parameters"]["n"]))
        return True

    def benchmark(mod, case, repetitions):
        x = torch.ones(case["parameters"]["n"])
        return [_launch(mod, x) for _ in range(3)]
    """
)

# ncu as far as the child can tell: run the program, then write the CSV (one row per launch
# profiled: the recorded H200 row, four times, its duration scaled by the factors in ncu.scales
# when that file exists) or, for an unknown metric, the error ncu prints.
FAKE_NCU = """
import subprocess, sys
args = sys.argv[1:]
opts = {}
while args[0].startswith("--"):
    flag = args[0] == "--csv"
    opts[args[0]] = None if flag else args[1]
    args = args[1:] if flag else args[2:]
assert opts["--clock-control"] == "none" and opts["--profile-from-start"] == "off"
assert opts["--kernel-name"] == "regex:^add_kernel$"
import os, time
with open(os.path.join(os.path.dirname(sys.argv[0]), "ncu.starts"), "a") as f:
    f.write(f"start {time.time()}\\n")
rc = subprocess.call(args)
with open(os.path.join(os.path.dirname(sys.argv[0]), "ncu.starts"), "a") as f:
    f.write(f"end {time.time()}\\n")
if "bogus__metric.sum" in opts["--metrics"]:
    print("==ERROR== Failed to find metric bogus__metric.sum")
    sys.exit(1)
import csv, io
lines = open(sys.argv[0] + ".csv").read().splitlines()
start = next(i for i, ln in enumerate(lines) if ln.startswith('"ID",'))
header, units, row = csv.reader(lines[start:start + 3])
scales_file = os.path.join(os.path.dirname(sys.argv[0]), "ncu.scales")
scales = open(scales_file).read().split() if os.path.exists(scales_file) else ["1"] * 4
col = header.index("gpu__time_duration.sum")
rows = []
for i, factor in enumerate(scales):
    launch = [str(i), *row[1:]]
    launch[col] = str(float(row[col].replace(",", "")) * float(factor))
    rows.append(launch)
buf = io.StringIO()
csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\\n").writerows([header, units, *rows])
open(opts["--log-file"], "w").write(buf.getvalue())
sys.exit(rc)
"""


def fake_ncu(tmp_path: Path) -> str:
    script = tmp_path / "ncu"
    script.write_text(f"#!{sys.executable}\n" + FAKE_NCU)
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    (tmp_path / "ncu.csv").write_text((DATA / "ncu_raw_h200_vector_add.csv").read_text())
    return str(script)


def profiler(tmp_path: Path) -> NcuProfiler:
    root = tmp_path / "bundle"
    root.mkdir()
    (root / "harness.py").write_text(HARNESS)
    cases = [CaseSpec(case_id="a", parameters={"n": 8}), CaseSpec(case_id="b", parameters={"n": 9})]
    env = {"TRITON_INTERPRET": "1"}
    bundle = HarnessBundle(
        root=root, cases=cases, target={"backend": "cuda", "environment": env}, environment=env
    )
    return NcuProfiler(Evaluator(bundle), ncu_command=fake_ncu(tmp_path))


def test_one_launch_per_case_is_profiled_under_ncu_and_the_next_child_is_prestarted(tmp_path):
    p = profiler(tmp_path)
    assert p.unavailable() is None
    cases = p.ev.bundle.cases
    try:
        # the baseline: a cold child (no candidate was begun), one warm-up launch then the profiled
        result = p.profile("c001", KERNEL, cases, "add_kernel", Level.SUMMARY, 120, tmp_path / "k")
        assert [e.case_id for e in result.events] == ["a", "b"], result.diagnostics
        for e in result.events:
            m = {x.name: x for x in e.metrics}
            assert abs(m[ncu.DURATION].value - 44.64) < 0.01 and m[ncu.DURATION].source == "ncu"
            assert m[ncu_child.PROFILING_WALL].value > 0 and m[ncu_child.CHILD_WALL].value > 0
            assert e.diagnostics.startswith("ncu summary set: launch 2 of add_kernel")
            assert Path(e.artifacts[0]).name == "ncu-summary.csv"
        assert result.wall_ms > 0 and result.settle_ms == 0.0
        # the next child was started while this cold one profiled, not after it
        (_, first_start), (_, second_start), (_, first_end) = [
            (w, float(t))
            for w, t in map(str.split, (tmp_path / "ncu.starts").read_text().split("\n")[:3])
        ]
        assert first_start < second_start < first_end
        # the next candidate's child is loading; the profile is done, so it may make its context
        nxt = p._next
        assert nxt is not None and nxt.kernel == "add_kernel" and nxt.pending == ["load", "warm"]
        # the loop hands the next source over when its evaluation starts, and waits before the
        # benchmark: by then the child has made its context, built it and verified every case
        p.begin(KERNEL)
        p.settle()
        cur = p._current
        assert cur is nxt and p._next is None
        assert cur.built == KERNEL and not cur.pending and cur.warmed == {"a", "b"}
        assert cur.released and cur.waited_ms > 0
        p.prestart()  # its last sample is taken: the child after it starts loading meanwhile
        assert p._next is not None and p._next is not cur and p._next.pending == ["load"]
        waited = cur.waited_ms
        again = p.profile("c002", KERNEL, cases[:1], "add_kernel", Level.SUMMARY, 120)
        (e,) = again.events
        assert e.metrics[0].value is not None and again.settle_ms == waited
        # its warm-up launch was the verification during begin: the range's first launch counts
        assert e.diagnostics.startswith("ncu summary set: launch 2 of add_kernel")
        assert p._current is None and p._next is not None and p._next.released
    finally:
        p.close()
    assert p._current is None and p._next is None


def test_a_candidate_with_no_ncu_profile_frees_the_gpu_for_the_next_child(tmp_path):
    p = profiler(tmp_path)
    p.kernel = "add_kernel"
    try:
        p.prestart()
        p.begin(KERNEL)
        p.prestart()
        waiting = p._next
        assert waiting is not None and not waiting.released
        p.skip()  # the loop decided this candidate gets no ncu profile (a clear loser)
        assert p._current is None and waiting.released and p._next is waiting
    finally:
        p.close()


def test_a_metric_ncu_does_not_know_is_dropped_null_with_a_diagnostic_and_the_run_repeated(
    tmp_path, monkeypatch
):
    monkeypatch.setitem(ncu_child.METRICS, Level.DEEP, (*ncu.SUMMARY_METRICS, "bogus__metric.sum"))
    p = profiler(tmp_path)
    try:
        result = p.profile("baseline", KERNEL, p.ev.bundle.cases[:1], "add_kernel", Level.DEEP, 120)
    finally:
        p.close()
    (e,) = result.events
    m = {x.name: x for x in e.metrics}
    assert m[ncu.DURATION].value is not None
    assert m["bogus__metric.sum"].value is None
    assert "bogus__metric.sum is not supported by this GPU or ncu" in e.diagnostics
    assert p.unsupported == ["bogus__metric.sum"]


def test_ncu_is_unavailable_on_a_cpu_target(tmp_path):
    root = tmp_path / "b"
    root.mkdir()
    bundle = HarnessBundle(root=root, cases=[], target={"backend": "cpu"})
    assert "unavailable on this target" in NcuProfiler(Evaluator(bundle)).unavailable()


def test_a_parallel_run_that_begins_no_child_is_profiled_by_the_prestarted_one(tmp_path):
    p = profiler(tmp_path)
    p.kernel = "add_kernel"
    try:
        p.prestart()
        waiting = p._next
        assert waiting is not None
        result = p.profile("c003", KERNEL, p.ev.bundle.cases[:1], "add_kernel", Level.SUMMARY, 120)
        (e,) = result.events
        assert e.metrics[0].value is not None, result.diagnostics
        assert waiting.session.closed and p._next is not waiting  # used, and a next one waits
        assert e.diagnostics.startswith("ncu summary set: launch 2 of add_kernel")
    finally:
        p.close()


def test_the_baseline_is_profiled_twice_and_beside_each_later_candidate_in_its_process(tmp_path):
    p = profiler(tmp_path)
    cases = p.ev.bundle.cases
    candidate = KERNEL + "\n# the candidate\n"
    try:
        # the baseline's own profile takes a second launch of its kernel right after the first
        # (rows: case a's first and second, b's): the veto's bar has three launches at c001
        (tmp_path / "ncu.scales").write_text("1.0 1.02 0.9 0.88")
        base = p.profile("baseline", KERNEL, cases, "add_kernel", Level.DEEP, 120, baseline=True)
        own = [{m.name: m.value for m in e.metrics} for e in base.events]
        assert [round(d[ncu.DURATION], 2) for d in own] == [44.64, 40.18]
        assert [round(d[ncu.REFERENCE_DURATION], 2) for d in own] == [45.53, 39.28]
        assert all(
            "a second launch of add_kernel profiled right" in e.diagnostics for e in base.events
        )
        assert p.reference == ncu_child.BaselineKernel(source=KERNEL, kernel="add_kernel")
        # the rows ncu writes, in launch order: case a's candidate, a's baseline, b's, b's
        (tmp_path / "ncu.scales").write_text("1.0 1.03 0.9 0.9")
        p.begin(candidate)
        p.settle()
        cur = p._current
        assert cur is not None and cur.paired and cur.ref_warmed == {"a", "b"}
        result = p.profile("c001", candidate, cases, "add_kernel", Level.SUMMARY, 120)
    finally:
        p.close()
    durations = [
        {m.name: m.value for m in e.metrics if m.name.endswith(ncu.DURATION)} for e in result.events
    ]
    assert [round(d[ncu.DURATION], 2) for d in durations] == [44.64, 40.18]
    assert [round(d[ncu.REFERENCE_DURATION], 2) for d in durations] == [45.98, 40.18]
    for e in result.events:
        assert "baseline's add_kernel profiled right after it in this process" in e.diagnostics


def test_a_baseline_that_cannot_be_built_beside_the_candidate_leaves_its_profile_alone(tmp_path):
    p = profiler(tmp_path)
    p.reference = ncu_child.BaselineKernel(source="raise RuntimeError('no')", kernel="add_kernel")
    try:
        result = p.profile("c001", KERNEL, p.ev.bundle.cases[:1], "add_kernel", Level.SUMMARY, 120)
    finally:
        p.close()
    (e,) = result.events
    names = {m.name: m.value for m in e.metrics}
    assert abs(names[ncu.DURATION] - 44.64) < 0.01 and ncu.REFERENCE_DURATION not in names
    assert "baseline's add_kernel not profiled in this process: the baseline's build failed" in (
        e.diagnostics
    )
