"""The evaluator against real harness child processes and real Triton kernels on the interpreter."""

from __future__ import annotations

import json
import os
import textwrap
import time
from pathlib import Path

import pytest

from optimizer.bundle.spec import CaseSpec
from optimizer.evaluation.attribution import MAIN_TIME
from optimizer.evaluation.evaluator import Evaluator
from optimizer.evaluation.requests import (
    EvalRequest,
    HarnessBundle,
    HarnessInvalidError,
    Reference,
)
from tlxstore.events import (
    BASELINE_ID,
    BenchmarkSampled,
    BuildFinished,
    CaseVerified,
    FailureKind,
    InfrastructureFailed,
    IntegrityFlagged,
    LaunchesObserved,
    Phase,
    ProfileCollected,
)

ADD_KERNEL = textwrap.dedent(
    """
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        y = tl.load(y_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, x + y, mask=mask)


    def add(x, y):
        out = torch.empty_like(x)
        n = x.numel()
        add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
        return out
    """
)

# A harness in the style of a TLX bundle: build imports the source as a module; verify compares
# against torch on inputs drawn from the global RNG; benchmark times with perf_counter.
HARNESS = textwrap.dedent(
    """
    import importlib.util
    import os
    import sys
    import tempfile
    import time

    import torch

    _n = [0]


    def build(kernel_source, target):
        _n[0] += 1
        d = tempfile.mkdtemp(prefix="kernel-")
        path = os.path.join(d, "candidate.py")
        with open(path, "w") as f:
            f.write(kernel_source)
        spec = importlib.util.spec_from_file_location(f"candidate_{_n[0]}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod


    def _inputs(case):
        n = case["parameters"]["n"]
        return torch.randn(n), torch.randn(n)


    def verify(mod, case):
        assert os.environ.get("TRITON_INTERPRET") == "1"
        x, y = _inputs(case)
        out = mod.add(x, y)
        err = (out - (x + y)).abs().max().item()
        print("verify printed to stdout", err)
        return {"passed": bool(torch.allclose(out, x + y)), "diagnostics": f"n={x.numel()}",
                "metrics": {"max_abs_error": err, "first_input": x[0].item()}}


    def benchmark(mod, case, repetitions):
        x, y = _inputs(case)
        mod.add(x, y)
        samples = []
        for _ in range(repetitions):
            t0 = time.perf_counter()
            mod.add(x, y)
            samples.append((time.perf_counter() - t0) * 1e6)
        return {"samples_us": samples, "warmup_count": 1, "cache_policy": f"pid{os.getpid()}",
                "bytes_moved": 12 * x.numel()}


    def profile(mod, case, request=None):
        return {"harness": {"launches": 1, "unknown_metric": None,
                            "request_level": request["level"] if request else "legacy"},
                "proton": {"kernel_names": ["add_kernel"], "time_ns": 1234.0}}
    """
)

CASES = [
    CaseSpec(case_id="small", parameters={"n": 1000}),
    CaseSpec(case_id="large", parameters={"n": 5000, "flops": 5000}, weight=2.0),
]


def make_bundle(tmp_path: Path, harness: str = HARNESS, cases=CASES, env=None) -> HarnessBundle:
    root = tmp_path / "bundle"
    root.mkdir(exist_ok=True)
    (root / "harness.py").write_text(harness)
    (root / "cases.json").write_text(json.dumps([c.model_dump() for c in cases]))
    kernel = tmp_path / "kernel.py"
    kernel.write_text(ADD_KERNEL)
    environment = {"TRITON_INTERPRET": "1", **(env or {})}
    return HarnessBundle(
        root=root,
        cases=list(cases),
        target={"backend": "cpu", "environment": environment},
        environment=environment,
        protected_paths=[root, kernel],
    )


def request(source: str = ADD_KERNEL, **kw) -> EvalRequest:
    args = dict(candidate_id="c001", source=source, repetitions=5, timeout_s=60.0, verify_repeats=2)
    args.update(kw)
    return EvalRequest(**args)


def run(ev: Evaluator, req: EvalRequest):
    events = []
    summary = ev.evaluate(req, events.append)
    return summary, events


def of(events, cls):
    return [e for e in events if isinstance(e, cls)]


def test_a_correct_triton_kernel_is_built_verified_three_times_per_case_and_benchmarked(tmp_path):
    ev = Evaluator(make_bundle(tmp_path))
    summary, events = run(ev, request())
    assert summary.built and summary.verified and summary.benchmarked, summary
    assert not summary.blocked_by_guard and not summary.infrastructure_failure
    builds = of(events, BuildFinished)
    assert len(builds) == 1 and builds[0].success and builds[0].duration_ms > 0
    verifications = of(events, CaseVerified)
    for case in ("small", "large"):
        attempts = [v for v in verifications if v.case_id == case]
        assert [v.attempt for v in attempts] == [1, 2, 3]  # two before, one after the benchmark
        assert all(v.passed for v in attempts)
        assert len({v.seed for v in attempts}) == 3  # a fresh seed every time
        # The seed reached the harness's RNG: different seeds gave different inputs.
        assert len({v.metrics["first_input"] for v in attempts}) == 3
        assert attempts[0].metrics["max_abs_error"] is not None
    samples = of(events, BenchmarkSampled)
    # 5 repetitions, the candidate alone: three blocks of 2, every case in each block
    assert [(s.block, s.case_id, len(s.samples_us)) for s in samples] == [
        (b, c, 2) for b in range(3) for c in ("small", "large")
    ]
    assert all(min(s.samples_us) > 0 for s in samples)
    assert samples[0].warmup_count == 1 and samples[0].bytes_moved == 12000
    assert samples[1].flops == 5000  # declared in the case parameters
    # tlxdb's own warm-up call before each case's first samples (the window's first call's for
    # warm_up_s: one call on the CPU): kept beside them, in no statistic
    assert [len(s.warmup_samples_us) for s in samples] == [1, 1, 0, 0, 0, 0]
    assert all(x > 0 for s in samples for x in s.warmup_samples_us)
    assert all(s.phase == Phase.ROUND and s.window_id == "c001" for s in samples)
    assert not any(s.extra for s in samples)  # no max_cv asked: no extra block
    # The last verification of each case comes after its benchmark.
    order = [(type(e).__name__, getattr(e, "case_id", None)) for e in events]
    assert order.index(("CaseVerified", "large")) < order.index(("BenchmarkSampled", "large"))
    assert max(i for i, o in enumerate(order) if o == ("CaseVerified", "large")) > order.index(
        ("BenchmarkSampled", "large")
    )
    # tlxdb's own attribution comes first; on the CPU it says Proton cannot run here, once, null.
    attributions = [p for p in of(events, ProfileCollected) if p.metrics[0].name == MAIN_TIME]
    assert len(attributions) == 1 and attributions[0].case_id == "small"
    assert "Proton is unavailable on this target" in attributions[0].diagnostics
    assert [(m.value, m.source) for m in attributions[0].metrics] == [(None, "proton")]
    # The harness's own profile() is still called and kept, with its sources.
    profiles = [p for p in of(events, ProfileCollected) if p not in attributions]
    assert len(profiles) == 2 and profiles[0].kernel_names == ["add_kernel"]
    metrics = {m.name: m for m in profiles[0].metrics}
    assert metrics["harness.unknown_metric"].value is None  # unknown stays null, never 0
    assert (
        metrics["proton.time_ns"].value == 1234.0 and metrics["proton.time_ns"].source == "proton"
    )


def test_before_benchmark_runs_after_the_verifications_and_before_the_first_sample(tmp_path):
    ev = Evaluator(make_bundle(tmp_path, cases=CASES[:1]))
    events: list = []
    marks: list[int] = []
    ev.evaluate(
        request(verify_repeats=1, profile=False), events.append, lambda: marks.append(len(events))
    )
    (mark,) = marks
    assert [type(e).__name__ for e in events[:mark]] == [
        "BuildFinished",
        "CaseVerified",
        "LaunchesObserved",  # what the first verification launched
    ]
    assert isinstance(events[mark], BenchmarkSampled)


def test_the_next_candidates_child_loads_once_the_last_sample_is_taken_and_serves_it(tmp_path):
    """keep_ready: the child of the next evaluation is started after this one's last sample (it
    imports the harness while the loop profiles, decides and proposes) and that evaluation runs
    in it; every candidate still gets a process of its own, and close() ends the spare one."""
    harness = HARNESS.replace(
        "_n = [0]",
        '_n = [0]\nopen(os.environ["MARKS"], "a").write(f"load {os.getpid()} {time.time()}\\n")',
    ) + textwrap.dedent(
        """
        _orig_benchmark = benchmark
        def benchmark(mod, case, repetitions):
            samples = _orig_benchmark(mod, case, repetitions)
            open(os.environ["MARKS"], "a").write(f"sampled {os.getpid()} {time.time()}\\n")
            return samples
        """
    )
    marks = tmp_path / "marks"

    def lines() -> list[tuple[str, int, float]]:
        return [(w, int(p), float(t)) for w, p, t in map(str.split, marks.read_text().splitlines())]

    ev = Evaluator(make_bundle(tmp_path, harness, cases=CASES[:1], env={"MARKS": str(marks)}))
    ev.keep_ready = True
    try:
        run(ev, request(candidate_id="c001", verify_repeats=1, profile=False))
        pid1 = lines()[0][1]

        def spare_loads() -> list[tuple[int, float]]:
            return [(p, t) for w, p, t in lines() if w == "load" and p != pid1]

        deadline = time.monotonic() + 120
        while not spare_loads() and time.monotonic() < deadline:  # the spare child loads
            time.sleep(0.05)
        ((spare, loaded),) = spare_loads()
        last_sample_of_first = max(t for w, p, t in lines() if w == "sampled" and p == pid1)
        assert loaded > last_sample_of_first
        began = time.time()
        run(ev, request(candidate_id="c002", verify_repeats=1, profile=False))
        # c002 ran in the spare child, loaded before its evaluation began
        assert {p for w, p, _ in lines() if w == "sampled"} == {pid1, spare} and loaded < began
    finally:
        ev.close()
    for pid in {p for _, p, _ in lines()}:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_a_probe_runs_in_a_child_of_its_own_and_leaves_the_spare_one_to_the_next_candidate(
    tmp_path,
):
    """Validation's probes (for_probes) run after the baseline's last sample, while the child
    kept ready for the first candidate loads: they neither take it nor leave a spare of their own
    that nobody would take."""
    ev = Evaluator(make_bundle(tmp_path, cases=CASES[:1]))
    ev.keep_ready = True
    try:
        run(ev, request(candidate_id=BASELINE_ID, verify_repeats=1, profile=False))
        spare = ev._ready
        assert spare is not None
        probe = ev.for_probes()
        assert not probe.static_checks and ev.static_checks
        summary, _ = run(probe, request(candidate_id="negative-x", verify_repeats=1, profile=False))
        assert summary.benchmarked and probe._ready is None
        assert ev._ready is spare and spare.proc.poll() is None  # still loading or loaded
    finally:
        ev.close()


def test_a_prestarted_child_that_died_is_replaced_by_a_fresh_one(tmp_path):
    ev = Evaluator(make_bundle(tmp_path, cases=CASES[:1]))
    ev.keep_ready = True
    try:
        summary, _ = run(ev, request(verify_repeats=1, profile=False))
        assert summary.benchmarked
        ev.stop()  # kills every child of this evaluator, the spare one too
        summary, events = run(ev, request(candidate_id="c002", verify_repeats=1, profile=False))
        assert summary.verified and summary.benchmarked, summary
        assert not of(events, InfrastructureFailed)
    finally:
        ev.close()


def test_the_baselines_first_two_verifications_record_every_kernel_launch(tmp_path):
    """The first says what the kernels are launched with; the baseline's second, the kernels
    compiled by then, how long each runs (the first's times include the JIT compile). A
    candidate's second verification is not observed: nothing reads it."""
    ev = Evaluator(make_bundle(tmp_path, cases=CASES[:1]))
    events: list = []
    ev.evaluate(request(verify_repeats=2, profile=False), events.append)
    assert [e.attempt for e in events if isinstance(e, LaunchesObserved)] == [1]
    events = []
    ev.evaluate(request(candidate_id=BASELINE_ID, verify_repeats=2, profile=False), events.append)
    observed = [e for e in events if isinstance(e, LaunchesObserved)]
    assert [e.attempt for e in observed] == [1, 2]
    for e in observed:
        (launch,) = e.launches
        assert launch.kernel == "add_kernel" and launch.count >= 1 and launch.total_us > 0
        assert launch.constexprs and all(type(v) is int for v in launch.constexprs.values())
    assert observed[0].launches[0].constexprs == observed[1].launches[0].constexprs


def test_the_bundle_environment_reaches_the_child_only(tmp_path):
    harness = HARNESS.replace(
        'assert os.environ.get("TRITON_INTERPRET") == "1"',
        'assert os.environ.get("TRITON_INTERPRET") == "1" and os.environ["TLXDB_TEST_MARK"] == "m1"',
    )
    ev = Evaluator(make_bundle(tmp_path, harness, env={"TLXDB_TEST_MARK": "m1"}))
    summary, _ = run(ev, request(verify_repeats=1, profile=False))
    assert summary.verified
    assert "TLXDB_TEST_MARK" not in os.environ


def test_events_reach_emit_while_the_child_is_still_running(tmp_path):
    harness = HARNESS + textwrap.dedent(
        """
        _orig_benchmark = benchmark
        def benchmark(mod, case, repetitions):
            time.sleep(1.5)
            return _orig_benchmark(mod, case, repetitions)
        """
    )
    ev = Evaluator(make_bundle(tmp_path, harness, cases=CASES[:1]))
    stamps = []
    ev.evaluate(
        request(verify_repeats=1, profile=False),
        lambda e: stamps.append((type(e).__name__, time.monotonic())),
    )
    build_t = dict(stamps)["BuildFinished"]
    bench_t = dict(stamps)["BenchmarkSampled"]
    assert bench_t - build_t >= 1.4  # the build event was emitted before the slow benchmark ran


def test_a_hanging_child_is_killed_with_its_whole_process_group(tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    harness = HARNESS + textwrap.dedent(
        f"""
        import subprocess
        def benchmark(mod, case, repetitions):
            p = subprocess.Popen(["sleep", "300"])
            open({str(pidfile)!r}, "w").write(str(p.pid))
            time.sleep(300)
        """
    )
    ev = Evaluator(make_bundle(tmp_path, harness, cases=CASES[:1]))
    t0 = time.monotonic()
    summary, events = run(ev, request(timeout_s=8.0, verify_repeats=1))
    assert time.monotonic() - t0 < 20
    failures = of(events, InfrastructureFailed)
    assert len(failures) == 1 and failures[0].kind == FailureKind.TIMEOUT
    assert failures[0].retryable and failures[0].stage == "benchmark"
    assert summary.infrastructure_failure and not summary.benchmarked
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        # a killed child of init may linger as a zombie for a moment
        if Path(f"/proc/{grandchild}/stat").read_text().split()[2] == "Z":
            break
        time.sleep(0.1)
    else:
        pytest.fail("the harness's own subprocess survived the timeout")


def test_a_child_killed_by_a_signal_is_a_retryable_crash(tmp_path):
    harness = HARNESS.replace("def verify(mod, case):", "def verify(mod, case):\n    os.abort()")
    ev = Evaluator(make_bundle(tmp_path, harness, cases=CASES[:1]))
    summary, events = run(ev, request())
    failures = of(events, InfrastructureFailed)
    assert len(failures) == 1 and failures[0].kind == FailureKind.CRASH and failures[0].retryable
    assert "SIGABRT" in failures[0].diagnostics and failures[0].stage == "verify"
    assert summary.built and not summary.verified and summary.infrastructure_failure


def test_a_candidate_that_raises_at_import_is_a_failed_build_with_the_traceback_tail(tmp_path):
    ev = Evaluator(make_bundle(tmp_path))
    summary, events = run(ev, request(ADD_KERNEL + "\nraise ValueError('candidate blew up')\n"))
    builds = of(events, BuildFinished)
    assert len(builds) == 1 and not builds[0].success
    assert "ValueError: candidate blew up" in builds[0].diagnostics
    assert not summary.built and not of(events, CaseVerified)


def test_explicit_build_results_are_honoured(tmp_path):
    harness = HARNESS.replace(
        "    return mod\n",
        '    if "BROKEN" in kernel_source:\n'
        '        return {"success": False, "diagnostics": "the compiler said no"}\n'
        '    return {"success": True, "artifact": mod, "diagnostics": "ok"}\n',
    )
    ev = Evaluator(make_bundle(tmp_path, harness, cases=CASES[:1]))
    summary, events = run(ev, request(ADD_KERNEL + "\nBROKEN = 1\n"))
    assert not of(events, BuildFinished)[0].success
    assert of(events, BuildFinished)[0].diagnostics == "the compiler said no"
    summary, events = run(ev, request(verify_repeats=1, profile=False))
    assert summary.verified and of(events, BuildFinished)[0].diagnostics == "ok"


def test_a_boolean_verify_works_and_a_wrong_kernel_fails_its_first_protected_case(tmp_path):
    harness = HARNESS.replace(
        '        return {"passed": bool(torch.allclose(out, x + y)), "diagnostics": f"n={x.numel()}",\n'
        '                "metrics": {"max_abs_error": err, "first_input": x[0].item()}}',
        "        return torch.allclose(out, x + y)",
    )
    ev = Evaluator(make_bundle(tmp_path, harness))
    summary, events = run(ev, request(ADD_KERNEL.replace("x + y, mask", "x - y, mask")))
    verifications = of(events, CaseVerified)
    assert [(v.case_id, v.passed) for v in verifications] == [("small", False)]
    assert not summary.verified and not of(events, BenchmarkSampled)
    assert "protected case small failed verification" in summary.reason


def test_an_unprotected_case_that_fails_is_left_out_of_the_benchmark(tmp_path):
    cases = [CaseSpec(case_id="tiny", parameters={"n": 7}, protected=False), CASES[0]]
    ev = Evaluator(make_bundle(tmp_path, cases=cases))
    bad = ADD_KERNEL.replace("x + y, mask", "tl.where(n < 10, x - y, x + y), mask")
    summary, events = run(ev, request(bad, profile=False))
    assert {s.case_id for s in of(events, BenchmarkSampled)} == {"small"}
    assert summary.verified and summary.benchmarked


@pytest.mark.parametrize(
    "returned, reason",
    [
        ("[]", "no samples"),
        ("[1.0, 0.0]", "must be positive"),
        ("[-3.0]", "must be positive"),
        ("[1.0, float('nan')]", "not a finite number"),
        ("[float('inf')]", "not a finite number"),
        ("{'samples_us': [2.0, 'fast']}", "not a finite number"),
        ("{'warmup_count': 3}", "without 'samples_us'"),
        ("42", "expected a list"),
    ],
)
def test_invalid_benchmark_samples_are_a_harness_error_not_samples(tmp_path, returned, reason):
    harness = HARNESS + f"\n\ndef benchmark(mod, case, repetitions):\n    return {returned}\n"
    ev = Evaluator(make_bundle(tmp_path, harness, cases=CASES[:1]))
    summary, events = run(ev, request(verify_repeats=1))
    assert not of(events, BenchmarkSampled)
    failures = of(events, InfrastructureFailed)
    assert len(failures) == 1 and failures[0].kind == FailureKind.HARNESS_ERROR
    assert not failures[0].retryable and reason in failures[0].diagnostics
    assert not summary.benchmarked and reason in summary.reason


def test_a_benchmark_that_refuses_one_repetition_is_measured_without_its_warm_up(tmp_path):
    harness = HARNESS + textwrap.dedent(
        """
        _orig_benchmark = benchmark
        def benchmark(mod, case, repetitions):
            if repetitions < 2:
                raise ValueError("at least 2 repetitions")
            return _orig_benchmark(mod, case, repetitions)
        """
    )
    ev = Evaluator(make_bundle(tmp_path, harness, cases=CASES[:1]))
    summary, events = run(ev, request(verify_repeats=1, profile=False))
    assert summary.benchmarked and summary.verified, summary
    sampled = of(events, BenchmarkSampled)
    assert [len(x.samples_us) for x in sampled] == [2, 2, 2]
    assert all(x.warmup_samples_us == [] for x in sampled)
    assert not of(events, InfrastructureFailed)


def test_a_plain_list_of_samples_is_accepted(tmp_path):
    harness = (
        HARNESS + "\n\ndef benchmark(mod, case, repetitions):\n    return [3.0] * repetitions\n"
    )
    ev = Evaluator(make_bundle(tmp_path, harness, cases=CASES[:1]))
    summary, events = run(ev, request(verify_repeats=1, profile=False))
    sampled = of(events, BenchmarkSampled)
    assert [x for s in sampled for x in s.samples_us] == [3.0] * 6
    assert all(s.warmup_count is None for s in sampled)


def test_the_legacy_two_argument_profile_is_called(tmp_path):
    harness = HARNESS.replace(
        "def profile(mod, case, request=None):", "def profile(mod, case):\n    request = None"
    )
    ev = Evaluator(make_bundle(tmp_path, harness, cases=CASES[:1]))
    _, events = run(ev, request(verify_repeats=1))
    (_, prof) = of(events, ProfileCollected)  # tlxdb's attribution, then the harness's profile
    assert any(m.name == "harness.launches" for m in prof.metrics)


def test_the_profile_request_carries_the_artifacts_dir(tmp_path):
    harness = HARNESS + textwrap.dedent(
        """
        def profile(mod, case, request):
            path = os.path.join(request["artifacts_dir"], "trace.hatchet")
            open(path, "w").write("{}")
            return {"proton": {"trace_path": path, "dram_bytes": None}}
        """
    )
    ev = Evaluator(make_bundle(tmp_path, harness, cases=CASES[:1]))
    _, events = run(ev, request(verify_repeats=1, artifacts_dir=tmp_path / "art"))
    (_, prof) = of(events, ProfileCollected)
    assert prof.artifacts and Path(prof.artifacts[0]).is_file()
    assert Path(prof.artifacts[0]).is_relative_to(tmp_path / "art")


def test_check_harness_accepts_a_complete_harness(tmp_path):
    Evaluator(make_bundle(tmp_path)).check_harness()


@pytest.mark.parametrize(
    "harness, message",
    [
        ("def build(s, t):\n    return s\n", "lacks verify, benchmark"),
        ("import no_such_module_tlxdb\n", "No module named 'no_such_module_tlxdb'"),
        ("raise RuntimeError('bad harness')\n", "bad harness"),
    ],
)
def test_check_harness_refuses_an_unusable_harness_with_one_line(tmp_path, harness, message):
    with pytest.raises(HarnessInvalidError) as info:
        Evaluator(make_bundle(tmp_path, harness)).check_harness()
    assert message in info.value.message and "\n" not in info.value.message


def test_an_unusable_harness_during_evaluate_is_a_harness_error_event(tmp_path):
    ev = Evaluator(make_bundle(tmp_path, "def build(s, t):\n    return s\n"))
    summary, events = run(ev, request())
    (failure,) = of(events, InfrastructureFailed)
    assert failure.kind == FailureKind.HARNESS_ERROR and not failure.retryable
    assert not summary.built


def test_revalidation_interleaves_finalist_and_baseline_in_one_child(tmp_path):
    ev = Evaluator(make_bundle(tmp_path))
    events = []
    faster = ADD_KERNEL.replace("BLOCK=1024", "BLOCK=2048").replace(
        "cdiv(n, 1024)", "cdiv(n, 2048)"
    )
    summary = ev.revalidate("c007", faster, "baseline", ADD_KERNEL, 3, 4, 120.0, events.append)
    assert summary.verified and summary.benchmarked
    sampled = of(events, BenchmarkSampled)
    # three alternations' worth of 4 repetitions: 6 blocks of 2, the finalist first in the first
    # three and the baseline in the last three (window.order, two members)
    turn = [("c007", "baseline"), ("baseline", "c007")]
    assert [(s.block, s.case_id, s.candidate_id) for s in sampled] == [
        (b, c, who) for b in range(6) for c in ("small", "large") for who in turn[b >= 3]
    ]
    assert all(s.phase == Phase.REVALIDATION and s.window_id == "c007" for s in sampled)
    # one warm-up call before each member's first samples of each case (block 0), no other
    assert [len(s.warmup_samples_us) for s in sampled] == [1] * 4 + [0] * (len(sampled) - 4)
    assert len({s.cache_policy for s in sampled}) == 1  # the harness saw one process id
    assert {b.candidate_id for b in of(events, BuildFinished)} == {"c007", "baseline"}
    with pytest.raises(ValueError):
        ev.revalidate("c007", faster, "baseline", ADD_KERNEL, 2, 4, 60.0, events.append)


def test_a_speedup_above_10x_over_the_parent_triggers_extra_verification_and_a_rebenchmark(
    tmp_path,
):
    ev = Evaluator(make_bundle(tmp_path, cases=CASES[:1]))
    summary, events = run(ev, request(parent_medians_us={"small": 1e9}, profile=False))
    flags = of(events, IntegrityFlagged)
    assert [f.guard for f in flags] == ["tripwire:speedup>10x"] and not flags[0].blocking
    assert [v.attempt for v in of(events, CaseVerified)] == [1, 2, 3, 4, 5]
    sampled = of(events, BenchmarkSampled)  # the window, then a second one: its re-measurement
    assert [(s.window_id, s.block) for s in sampled] == [
        (w, b) for w in ("c001", "c001.remeasure") for b in range(3)
    ]
    assert summary.verified


def test_a_throughput_above_the_hardware_ceiling_is_a_tripwire(tmp_path):
    ev = Evaluator(make_bundle(tmp_path, cases=CASES[:1]), peak_bandwidth_bytes_per_s=1.0)
    _, events = run(ev, request(profile=False, verify_repeats=1))
    flags = of(events, IntegrityFlagged)
    assert [f.guard for f in flags] == ["tripwire:bandwidth>ceiling"] and not flags[0].blocking
    assert "exceeds the hardware ceiling" in flags[0].detail


def test_a_candidate_that_replaces_torch_allclose_is_caught_by_the_snapshot(tmp_path):
    cheat = ADD_KERNEL + "\ntorch.allclose = lambda *a, **k: True\n"
    ev = Evaluator(make_bundle(tmp_path), static_checks=False)
    summary, events = run(ev, request(cheat))
    flags = of(events, IntegrityFlagged)
    assert [f.guard for f in flags] == ["patched:torch.allclose"] and flags[0].blocking
    assert summary.blocked_by_guard and not of(events, CaseVerified)


def test_a_candidate_that_rewrites_the_harness_on_disk_is_caught_by_the_file_hashes(tmp_path):
    cheat = ADD_KERNEL + textwrap.dedent(
        """
        import sys as _s
        _p = _s.modules["harness"].__file__
        _src = open(_p).read()
        open(_p, "w").write(_src + "\\n# tampered\\n")
        """
    )
    bundle = make_bundle(tmp_path)
    ev = Evaluator(bundle, static_checks=False)
    summary, events = run(ev, request(cheat, verify_repeats=1, profile=False))
    flags = of(events, IntegrityFlagged)
    assert [f.guard for f in flags] == ["files:changed"] and flags[0].blocking
    assert str(bundle.root / "harness.py") in flags[0].detail
    assert summary.blocked_by_guard


def test_static_findings_block_before_any_child_runs(tmp_path):
    cheat = "import threading\n" + ADD_KERNEL
    ev = Evaluator(make_bundle(tmp_path))
    summary, events = run(ev, request(cheat))
    assert [f.guard for f in of(events, IntegrityFlagged)] == ["static:thread"]
    assert summary.blocked_by_guard and not of(events, BuildFinished)


def test_replacing_the_snapshot_check_from_inside_the_child_does_not_silence_it(tmp_path):
    cheat = ADD_KERNEL + textwrap.dedent(
        """
        import optimizer.evaluation.guards.snapshot as _s
        _s.Snapshot.changed = lambda self: []
        torch.allclose = lambda *a, **k: True
        """
    )
    ev = Evaluator(make_bundle(tmp_path), static_checks=False)
    summary, events = run(ev, request(cheat))
    guards = {f.guard for f in of(events, IntegrityFlagged)}
    assert "patched:torch.allclose" in guards
    assert (
        "patched:optimizer.evaluation.guards.snapshot.Snapshot" not in guards
    )  # the class is the same object
    assert summary.blocked_by_guard


def test_a_benchmark_that_raises_is_a_harness_error_with_the_traceback_tail(tmp_path):
    harness = HARNESS + "\n\ndef benchmark(mod, case, repetitions):\n    return 1 / 0\n"
    ev = Evaluator(make_bundle(tmp_path, harness, cases=CASES[:1]))
    summary, events = run(ev, request(verify_repeats=1))
    (failure,) = of(events, InfrastructureFailed)
    assert failure.kind == FailureKind.HARNESS_ERROR and not failure.retryable
    assert "ZeroDivisionError: division by zero" in failure.diagnostics
    assert "ZeroDivisionError" in summary.reason and not summary.benchmarked


def test_a_verify_that_raises_is_a_failed_verification_with_the_traceback_tail(tmp_path):
    harness = HARNESS.replace(
        "def verify(mod, case):", "def verify(mod, case):\n    raise KeyError('missing tensor')"
    )
    ev = Evaluator(make_bundle(tmp_path, harness, cases=CASES[:1]))
    summary, events = run(ev, request())
    (verification,) = of(events, CaseVerified)
    assert not verification.passed and "KeyError: 'missing tensor'" in verification.diagnostics
    assert not of(events, InfrastructureFailed) and not summary.verified


# ---- measurement windows: the candidate beside its references ----------------------------------


def test_a_window_alternates_the_candidate_with_its_references_block_by_block(tmp_path):
    ev = Evaluator(make_bundle(tmp_path, cases=CASES[:1]))
    faster = ADD_KERNEL.replace("BLOCK=1024", "BLOCK=2048").replace(
        "cdiv(n, 1024)", "cdiv(n, 2048)"
    )
    refs = [
        Reference(candidate_id=BASELINE_ID, source=ADD_KERNEL),
        Reference(candidate_id="c004", source=faster),
    ]
    summary, events = run(ev, request(repetitions=6, references=refs, profile=False))
    assert summary.verified and summary.benchmarked, summary
    sampled = of(events, BenchmarkSampled)
    members = ["c001", BASELINE_ID, "c004"]
    assert [(s.block, s.candidate_id) for s in sampled] == [
        (b, members[(b + i) % 3]) for b in range(3) for i in range(3)
    ]  # a Latin square: each member first, second and last once
    assert all(s.window_id == "c001" and len(s.samples_us) == 2 for s in sampled)
    # the references are built in the child, not verified again, and record no build of their own
    assert {b.candidate_id for b in of(events, BuildFinished)} == {"c001"}
    assert {v.candidate_id for v in of(events, CaseVerified)} == {"c001"}


def test_a_reference_that_does_not_build_beside_the_candidate_fails_it_as_a_harness_error(tmp_path):
    ev = Evaluator(make_bundle(tmp_path, cases=CASES[:1]))
    refs = [Reference(candidate_id=BASELINE_ID, source="def broken(:\n")]
    summary, events = run(ev, request(references=refs, profile=False))
    (failure,) = of(events, InfrastructureFailed)
    assert failure.kind == FailureKind.HARNESS_ERROR and not failure.retryable
    assert "the reference baseline did not build beside it" in failure.diagnostics
    assert not of(events, BenchmarkSampled) and not summary.benchmarked


# A harness in a user's style: build writes the source to a file of one fixed name and imports it.
# From the second build on, `import` hands back Python's cached module: the first source's.
FIXED_NAME_HARNESS = textwrap.dedent(
    """
    import importlib
    import os
    import sys
    import tempfile
    import time

    import torch

    _DIR = tempfile.mkdtemp(prefix="fixed-name-")


    def build(kernel_source, target):
        with open(os.path.join(_DIR, "fixed_kernel.py"), "w") as f:
            f.write(kernel_source)
        if _DIR not in sys.path:
            sys.path.insert(0, _DIR)
        IMPORT
        return RETURNED


    def _add(artifact):
        return artifact[1] if isinstance(artifact, tuple) else getattr(artifact, "add", artifact)


    def verify(artifact, case):
        x, y = torch.randn(case["parameters"]["n"]), torch.randn(case["parameters"]["n"])
        return bool(torch.allclose(_add(artifact)(x, y), x + y))


    def benchmark(artifact, case, repetitions):
        x, y = torch.randn(case["parameters"]["n"]), torch.randn(case["parameters"]["n"])
        samples = []
        for _ in range(repetitions):
            t0 = time.perf_counter()
            _add(artifact)(x, y)
            samples.append((time.perf_counter() - t0) * 1e6)
        return samples
    """
)
SAME_ARTIFACT = (
    "build() returned the same artifact for two different sources: does it import the kernel "
    "under a fixed module name? give each build its own module name"
)
FASTER = ADD_KERNEL.replace("BLOCK=1024", "BLOCK=2048").replace("cdiv(n, 1024)", "cdiv(n, 2048)")


def fixed_name_harness(imported: str = "import fixed_kernel", returned: str = "fixed_kernel"):
    return FIXED_NAME_HARNESS.replace("IMPORT", imported).replace("RETURNED", returned)


@pytest.mark.parametrize(
    "imported, returned",
    [
        ("import fixed_kernel", "fixed_kernel"),
        ("fixed_kernel = importlib.import_module('fixed_kernel')", "fixed_kernel.add"),
        ("import fixed_kernel", "(fixed_kernel, fixed_kernel.add)"),
    ],
)
def test_a_build_that_imports_every_source_under_one_module_name_is_a_harness_error(
    tmp_path, imported, returned
):
    """The reference built after the candidate got the candidate's module back: the window would
    have measured one kernel against itself (a user's 2.7x faster candidate read 0.994x and was
    rejected). The evaluation fails as a harness error saying why, before any sample."""
    ev = Evaluator(make_bundle(tmp_path, fixed_name_harness(imported, returned), cases=CASES[:1]))
    refs = [Reference(candidate_id=BASELINE_ID, source=ADD_KERNEL)]
    summary, events = run(ev, request(FASTER, references=refs, profile=False, verify_repeats=1))
    (failure,) = of(events, InfrastructureFailed)
    assert failure.kind == FailureKind.HARNESS_ERROR and not failure.retryable
    assert (failure.candidate_id, failure.stage, failure.diagnostics) == (
        "c001",
        "build",
        SAME_ARTIFACT,
    )
    assert summary.reason == SAME_ARTIFACT and not summary.benchmarked
    assert not of(events, BenchmarkSampled)


def test_a_revalidation_whose_baseline_builds_into_the_finalist_s_module_is_a_harness_error(
    tmp_path,
):
    ev = Evaluator(make_bundle(tmp_path, fixed_name_harness(), cases=CASES[:1]))
    events: list = []
    summary = ev.revalidate("c007", FASTER, BASELINE_ID, ADD_KERNEL, 3, 2, 120.0, events.append)
    (failure,) = of(events, InfrastructureFailed)
    assert failure.kind == FailureKind.HARNESS_ERROR and failure.diagnostics == SAME_ARTIFACT
    assert summary.reason == SAME_ARTIFACT and not of(events, BenchmarkSampled)


def test_one_source_built_twice_may_return_the_same_artifact(tmp_path):
    """A harness may cache its builds by source: the candidate beside a reference of the same
    source, and the second window's new instances of each, measure that kernel beside itself,
    which is what was asked."""
    ev = Evaluator(make_bundle(tmp_path, fixed_name_harness(), cases=CASES[:1]))
    refs = [Reference(candidate_id=BASELINE_ID, source=ADD_KERNEL)]
    events: list = []
    summary = ev.evaluate(
        request(references=refs, profile=False, verify_repeats=1),
        events.append,
        second_window=lambda: True,
    )
    assert summary.benchmarked and summary.verified and not of(events, InfrastructureFailed)
    assert {s.window_id for s in of(events, BenchmarkSampled)} == {"c001", "c001.remeasure"}


def test_a_noisy_case_gets_extra_blocks_up_to_the_limit_and_a_quiet_one_none(tmp_path):
    """Every third call of the small case is ten times slower: its CV stays above max_cv, so it
    gets every extra turn allowed (3 blocks: one whole turn of two); the large case gets none."""
    harness = HARNESS + textwrap.dedent(
        """
        _plain = benchmark
        _calls = [0]
        def benchmark(mod, case, repetitions):
            result = _plain(mod, case, repetitions)
            if case["case_id"] == "small":
                _calls[0] += 1
                if _calls[0] % 3 == 0:
                    result["samples_us"] = [10 * s for s in result["samples_us"]]
            else:
                result["samples_us"] = [1000.0 + i for i in range(len(result["samples_us"]))]
            return result
        """
    )
    ev = Evaluator(make_bundle(tmp_path, harness))
    refs = [Reference(candidate_id=BASELINE_ID, source=ADD_KERNEL)]
    req = request(repetitions=4, references=refs, profile=False, max_cv=0.1, max_extra_blocks=3)
    summary, events = run(ev, req)
    assert summary.benchmarked, summary
    sampled = of(events, BenchmarkSampled)
    extra = [(s.block, s.case_id) for s in sampled if s.extra]
    assert sorted(set(extra)) == [(2, "small"), (3, "small")]
    assert len(extra) == 4  # both members, each extra block
    assert max(s.block for s in sampled if s.case_id == "large") == 1


def test_a_window_warms_up_for_the_evaluator_s_seconds_before_its_first_samples(tmp_path):
    """On a GPU the window warms up for window.GPU_WARM_UP_S (the H200's clock swing after an
    idle); here the harness call takes 50 ms, so 0.4 s take about 8 warm-up calls, all kept as
    the first call's warm-up samples and none among the samples; 0 s take one call. The
    reference's first call gets its one warm-up call either way."""
    harness = HARNESS + textwrap.dedent(
        """
        _plain = benchmark
        def benchmark(mod, case, repetitions):
            time.sleep(0.05)
            return _plain(mod, case, repetitions)
        """
    )
    bundle = make_bundle(tmp_path, harness, cases=CASES[:1])
    refs = [Reference(candidate_id=BASELINE_ID, source=ADD_KERNEL)]
    req = request(repetitions=2, references=refs, profile=False)
    _, events = run(Evaluator(bundle, warm_up_s=0.4), req)
    warm = [len(s.warmup_samples_us) for s in of(events, BenchmarkSampled)]
    assert 6 <= warm[0] <= 9 and warm[1:] == [1] + [0] * (len(warm) - 2), warm
    _, events = run(Evaluator(bundle), req)
    warm = [len(s.warmup_samples_us) for s in of(events, BenchmarkSampled)]
    assert warm == [1, 1] + [0] * (len(warm) - 2), warm


def test_each_member_s_first_call_on_each_case_is_a_warm_up_in_no_statistic(tmp_path):
    """A reference is built in the child but not verified, and a second window's instances are
    built anew: their first call on a case compiles their kernels or runs an autotuner's search
    (a user's baseline read [1411554, 68373, 68077, ...] us, and the case was then too noisy).
    Here a kernel's first benchmark call on a case, unless verify ran it, returns that first
    sample: every member's first call on each case in a window is one warm-up call, so none
    reaches the samples or the noise check, at one extra call per member, case and window."""
    harness = HARNESS + textwrap.dedent(
        """
        _ran = set()  # (artifact, case) whose kernels ran: compiled, tuned
        _verify = verify


        def verify(mod, case):
            _ran.add((id(mod), case["case_id"]))
            return _verify(mod, case)


        def benchmark(mod, case, repetitions):
            mod.add(*_inputs(case))
            first = (id(mod), case["case_id"]) not in _ran
            _ran.add((id(mod), case["case_id"]))
            return [1411554.0 if first and i == 0 else 68000.0 + i for i in range(repetitions)]
        """
    )
    ev = Evaluator(make_bundle(tmp_path, harness))
    refs = [Reference(candidate_id=BASELINE_ID, source=ADD_KERNEL)]
    req = request(
        FASTER,
        references=refs,
        profile=False,
        verify_repeats=1,
        repetitions=4,
        max_cv=0.05,
        max_extra_blocks=4,
    )
    events: list = []
    summary = ev.evaluate(req, events.append, second_window=lambda: True)
    assert summary.benchmarked and summary.verified, summary
    sampled = of(events, BenchmarkSampled)
    assert all(x < 1e6 for s in sampled for x in s.samples_us)
    assert not any(s.extra for s in sampled)  # no case was noisy
    slow = {
        (s.window_id, s.candidate_id, s.instance, s.case_id)
        for s in sampled
        if s.warmup_samples_us == [1411554.0]
    }
    assert slow == {
        ("c001", BASELINE_ID, 1, "small"),
        ("c001", BASELINE_ID, 1, "large"),
        *(
            ("c001.remeasure", who, instance, case)
            for who in ("c001", BASELINE_ID)
            for instance in (2, 3)
            for case in ("small", "large")
        ),
    }
    # one warm-up call before each member's first call on each case in each window, no other
    seen: set[tuple[str, str, int, str]] = set()
    for s in sampled:
        member = (str(s.window_id), s.candidate_id, s.instance, s.case_id)
        assert len(s.warmup_samples_us) == (member not in seen), member
        seen.add(member)
    assert len(seen) == 2 * 2 + 6 * 2  # two members in the first window, six in the second
