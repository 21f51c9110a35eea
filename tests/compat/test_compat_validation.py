"""Validation outcomes (docs/VALIDATION.md) on bundles in the TLX agent's shapes: what cannot be
proven harmful warns once and the run goes on; what can, fails; --strict-validation fails on
warnings."""

from __future__ import annotations

import json
import re

from compat_cli import bundle, invoke, kernel

from tlxstore.events import CheckOutcome
from tlxstore.fold import fold
from tlxstore.store import Store

HOST_WARNINGS = ["baseline:samples", "baseline:profile", "negative:wrong_answer"]
NO_ATTRIBUTION = (
    "the harness's profile attributes time to no kernel; candidates are compared on end-to-end "
    "latency where tlxdb cannot profile them itself"
)


def _table(stdout: str) -> dict[str, str]:
    return {ln.split()[1]: ln.split()[0] for ln in stdout.splitlines()[1:]}


def test_a_tlx_host_bundle_validates_with_warnings_printed_once(tmp_path):
    args = [
        "validate",
        "--kernel",
        kernel("host_add.py", tmp_path / "src"),
        "--bundle",
        bundle("host_synthetic", tmp_path),
    ]
    r = invoke(args)
    assert r.exit_code == 0, r.stderr
    assert _table(r.stdout) == {
        "cases:protected": "PASS",
        "harness": "PASS",
        "baseline:build": "PASS",
        "baseline:verify": "PASS",
        "baseline:samples": "WARN",
        "baseline:attribution": "PASS",
        "baseline:profile": "WARN",
        "harness:fresh_build": "PASS",
        "negative:unbuildable": "PASS",
        "negative:wrong_output": "PASS",
        "negative:wrong_answer": "WARN",
    }
    assert "synthetic timing" in r.stdout
    for name in HOST_WARNINGS:
        assert r.stderr.count(f"warning: {name}: ") == 1, r.stderr
    strict = invoke([*args, "--strict-validation"])
    assert strict.exit_code == 1
    assert {k for k, v in _table(strict.stdout).items() if v == "FAIL"} == set(HOST_WARNINGS)
    assert strict.stderr.strip().splitlines()[-1] == (
        "Error: validation failed (baseline:samples); the bundle cannot protect an optimization"
    )


def test_a_tlx_host_bundle_optimizes_and_its_warnings_are_in_the_run(tmp_path, wider_blocks):
    out, store = tmp_path / "out", tmp_path / "s.duckdb"
    args = [
        "optimize",
        "--kernel",
        kernel("host_add.py", tmp_path / "src"),
        "--bundle",
        bundle("host_synthetic", tmp_path),
        "--store",
        store,
        "--output-dir",
        out,
        "--provider",
        wider_blocks,
        "--no-commit-winner",
    ]
    r = invoke(args)
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["winner_id"] == "c001"
    for name in HOST_WARNINGS:
        assert r.stderr.count(f"warning: {name}: ") == 1, r.stderr
    # The legacy profile(artifact, case) was called with two arguments: it returned its numbers
    # (a third argument would have raised TypeError, a "profile raised" warning and no numbers).
    assert f"warning: baseline:profile: {NO_ATTRIBUTION}" in r.stderr.splitlines()
    assert "profile raised" not in r.stderr
    latency = {"n4096": 0.1, "n1000": 0.1}
    assert json.loads((out / "baseline_profile.json").read_text()) == {
        case: {"latency_ms": ms, "tflops": None} for case, ms in latency.items()
    }
    c001 = json.loads((out / "experiments/c001/profile.json").read_text())
    assert {case: p["latency_ms"] for case, p in c001.items()} == {"n4096": 0.025, "n1000": 0.025}
    run_id = json.loads(r.stdout)["run_id"]
    v = fold(Store(store).run_envelopes(run_id)).validation
    assert v is not None and v.passed and not v.strict
    assert [c.name for c in v.warnings] == HOST_WARNINGS
    assert all(c.outcome == CheckOutcome.WARN for c in v.warnings)
    shown = invoke(["show", run_id, "--store", store])
    assert shown.stdout.count("warning: baseline:profile: ") == 1
    report = (out / "report.md").read_text()
    assert "## Validation (3 warning(s))" in report
    assert "| baseline:profile | warn |" in report
    written = invoke(["report", run_id, "--store", store, "--to", tmp_path / "rep"])
    assert written.exit_code == 0, written.stderr
    assert (tmp_path / "rep" / "report.md").read_text() == report  # one report, one writer


def test_strict_validation_makes_a_warning_a_failure_and_writes_nothing(tmp_path):
    out = tmp_path / "out"
    r = invoke(
        [
            "optimize",
            "--kernel",
            kernel("host_add.py", tmp_path / "src"),
            "--bundle",
            bundle("host_synthetic", tmp_path),
            "--store",
            tmp_path / "s.duckdb",
            "--output-dir",
            out,
            "--no-commit-winner",
            "--strict-validation",
        ]
    )
    assert r.exit_code == 1
    assert r.stderr.strip().splitlines()[-1] == (
        "Error: bundle validation failed (baseline:samples): constant samples (CV 0) in every "
        "case: the harness reports synthetic timing, not a measurement; speedups will be whatever "
        "it reports (--strict-validation)"
    )
    assert not out.exists()


ACCEPTS_ANYTHING = """

def verify(artifact, case):
    return True


def profile(artifact, case):
    raise RuntimeError("no profiler on this host")
"""


def test_a_verify_that_accepts_everything_fails_even_on_a_host_path(tmp_path):
    r = invoke(
        [
            "validate",
            "--kernel",
            kernel("host_add.py", tmp_path / "src"),
            "--bundle",
            bundle("host_synthetic", tmp_path, harness_append=ACCEPTS_ANYTHING),
        ]
    )
    assert r.exit_code == 1
    table = _table(r.stdout)
    assert table["negative:wrong_output"] == "FAIL" and table["baseline:profile"] == "WARN"
    assert "profile raised: RuntimeError: no profiler on this host" in r.stdout
    assert (
        "verify() accepted a kernel whose results are NaN (the kernel's code never ran): "
        "it can pass a wrong kernel" in r.stdout
    )
    assert r.stderr.strip().splitlines()[-1] == (
        "Error: validation failed (negative:wrong_output); the bundle cannot protect an optimization"
    )


def test_a_bundle_without_a_protected_case_is_its_own_error(tmp_path):
    cases = json.dumps([{"case_id": "n64", "parameters": {"n": 64}, "protected": False}])
    r = invoke(
        [
            "validate",
            "--kernel",
            kernel("host_add.py", tmp_path / "src"),
            "--bundle",
            bundle("host_synthetic", tmp_path, cases=cases),
        ]
    )
    assert r.exit_code == 1
    assert [ln.split()[:2] for ln in r.stdout.splitlines()[1:]] == [["FAIL", "cases:protected"]]
    assert "no wrong answer could disqualify a candidate" in r.stdout


def test_max_cv_0_in_budget_json_is_accepted_as_the_tlx_agent_does_and_admits_constant_samples(
    tmp_path, wider_blocks
):
    root = bundle("host_synthetic", tmp_path)
    budget = json.loads((root / "budget.json").read_text())
    (root / "budget.json").write_text(json.dumps({**budget, "max_cv": 0}))
    store = tmp_path / "s.duckdb"
    r = invoke(
        [
            "optimize",
            "--kernel",
            kernel("host_add.py", tmp_path / "src"),
            "--bundle",
            root,
            "--store",
            store,
            "--output-dir",
            tmp_path / "out",
            "--provider",
            wider_blocks,
            "--no-commit-winner",
        ]
    )
    assert r.exit_code == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["winner_id"] == "c001"  # CV 0 is not above max_cv 0
    state = fold(Store(store).run_envelopes(result["run_id"]))
    assert state.started is not None and state.started.thresholds.max_cv == 0
    assert "max CV 0" in r.stderr.splitlines()[0]


def test_samples_noisier_than_max_cv_warn_once_naming_each_case_and_the_bound(tmp_path):
    r = invoke(
        [
            "validate",
            "--kernel",
            kernel("vecadd.py", tmp_path / "src"),
            "--bundle",
            bundle("structured", tmp_path),  # perf_counter timing on the interpreter: never CV 0
            "--benchmark-repetitions",
            "5",
            "--max-cv",
            "0.0001",
        ]
    )
    assert r.exit_code == 0, r.stderr
    assert _table(r.stdout)["baseline:samples"] == "WARN"
    [line] = [ln for ln in r.stderr.splitlines() if ln.startswith("warning: baseline:samples: ")]
    # each case measured again (6 samples, then up to 6 extra blocks of 2), then named with what
    # tlxdb knows of the cause (no kernel timer on the interpreter) and what it means
    cause = r"\(no kernel timer on this target tells the harness's own time from the kernel's\)"
    assert re.fullmatch(
        rf"warning: baseline:samples: case n2048 has CV \d+\.\d{{3}} > --max-cv 0\.0001 over 18 "
        rf"samples {cause}; case n1000 has CV \d+\.\d{{3}} > --max-cv 0\.0001 over 18 samples "
        rf"{cause}: a candidate is promoted only when its whole interval lies above --min-speedup, "
        r"with a note naming the case \(--strict-noise refuses it\)",
        line,
    ), line
