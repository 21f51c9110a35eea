"""Decisions on noisy evidence, through the real CLI: a case noisier than --max-cv no longer
throws away a clear win (it is decided on its interval, with a note); --strict-noise restores the
TLX agent's rule; a finalist that fails final revalidation hands over to the next promoted
candidate (the winner chain)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.bundles import FIXTURES, VECADD_CASES, kernel_copy, sleep_bundle
from support.scripted_provider import Step, set_block

import queries
from cli.main import main
from tlxstore.runlog import read_envelopes
from tlxstore.store import Store

# Vector add timed as many harnesses time a small case: the wall time of each call, launch and
# wrapper overhead included. Every third call of the small case pays that overhead twice (a
# second launch), so its samples are bimodal, one in three twice as slow, as small cases measured
# with do_bench on a GPU are (15-24 us for a 10 us kernel).
BIMODAL_HARNESS = """
import importlib.util, os, tempfile, time, uuid
import torch

_calls = 0


def build(kernel_source, target):
    path = os.path.join(tempfile.mkdtemp(prefix="bimodal-"), "kernel.py")
    with open(path, "w") as f:
        f.write(kernel_source)
    spec = importlib.util.spec_from_file_location(f"bimodal_{uuid.uuid4().hex}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _inputs(case):
    n = case["parameters"]["n"]
    return torch.randn(n), torch.randn(n)


def verify(artifact, case):
    x, y = _inputs(case)
    out = artifact.add(x, y)
    return {"passed": bool(torch.allclose(out, x + y)), "diagnostics": ""}


def benchmark(artifact, case, repetitions):
    global _calls
    x, y = _inputs(case)
    artifact.add(x, y)
    samples = []
    for _ in range(repetitions):
        t0 = time.perf_counter()
        artifact.add(x, y)
        if case["parameters"].get("overhead"):
            _calls += 1
            if _calls % 3 == 0:
                artifact.add(x, y)
        samples.append((time.perf_counter() - t0) * 1e6)
    return {"samples_us": samples}
"""
BIMODAL_CASES = [
    {"case_id": "large", "parameters": {"n": 8192}, "weight": 1.0},
    {"case_id": "small", "parameters": {"n": 512, "overhead": True}, "weight": 1.0},
]


def _bimodal_bundle(dest: Path) -> Path:
    dest.mkdir(parents=True)
    (dest / "harness.py").write_text(BIMODAL_HARNESS)
    (dest / "cases.json").write_text(json.dumps(BIMODAL_CASES))
    shutil.copy(FIXTURES / "vecadd_bundle" / "target.json", dest / "target.json")
    return dest


def _optimize(tmp: Path, bundle: Path, *extra: str):
    args = [
        "optimize",
        "--kernel",
        str(kernel_copy(tmp / "src")),
        "--bundle",
        str(bundle),
        "--store",
        str(tmp / "s.duckdb"),
        "--output-dir",
        str(tmp / "out"),
        "--provider",
        "scripted",
        "--candidates-per-round",
        "1",
        "--max-candidate-seconds",
        "300",
        "--no-commit-winner",
        *extra,
    ]
    return CliRunner().invoke(main, args, catch_exceptions=False)


def _decision(tmp: Path, cid: str):
    state_events = [e.event for e in read_envelopes(tmp / "out")]
    return next(e for e in state_events if e.type == "DecisionMade" and e.candidate_id == cid)


NOISY = ["--max-rounds", "1", "--benchmark-repetitions", "6", "--max-cv", "0.1"]


@pytest.mark.slow
def test_a_clear_win_on_a_bimodal_small_case_is_promoted_kept_and_noted(tmp_path, scripted):
    scripted.append(set_block(1024))
    r = _optimize(tmp_path, _bimodal_bundle(tmp_path / "bundle"), *NOISY)
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["winner_id"] == "c001" and out["ci_low"] > 1.01
    decided = _decision(tmp_path, "c001")
    assert decided.outcome == "promoted" and decided.ci_low > 1.01
    assert any(re.search(r"case small CV \d\.\d{3} above max 0\.1", n) for n in decided.notes)
    small = next(c for c in decided.cases if c.case_id == "small")
    assert small.candidate_samples > 6, "a noisy case is measured again before it is decided"
    assert "note: case small CV" in r.stderr and "small is noisy (CV" in r.stderr
    warned = next(ln for ln in r.stderr.splitlines() if ln.startswith("warning: baseline:samples"))
    assert "case small has CV" in warned and "interval lies above --min-speedup" in warned
    store = Store(tmp_path / "s.duckdb")
    row = queries.query(
        store, "SELECT notes FROM decisions WHERE candidate_id = 'c001'"
    ).to_pylist()
    assert row and row[0]["notes"] == decided.notes


@pytest.mark.slow
def test_strict_noise_refuses_the_same_win_as_the_tlx_agent_does(tmp_path, scripted):
    scripted.append(set_block(1024))
    r = _optimize(tmp_path, _bimodal_bundle(tmp_path / "bundle"), *NOISY, "--strict-noise")
    assert r.exit_code == 2, r.stderr
    decided = _decision(tmp_path, "c001")
    assert decided.outcome == "rejected" and "case small CV" in decided.reason
    assert json.loads(r.stdout)["winner_id"] is None


SLOW_MARK = "# SLOW WHEN FLAGGED"


@pytest.mark.slow
def test_a_finalist_that_fails_revalidation_hands_over_to_the_next_promoted(tmp_path, scripted):
    """c002 beats c001 in its window; then (the flag file appears while c003 is proposed) c002
    runs three times slower, so it fails final revalidation, and c001 is revalidated and kept."""
    flag = tmp_path / "flag"
    slowed = f"""

_build = build


def build(kernel_source, target):
    artifact = _build(kernel_source, target)
    artifact.SLOWED = {SLOW_MARK!r} in kernel_source
    return artifact


_benchmark = benchmark


def benchmark(artifact, case, repetitions):
    result = _benchmark(artifact, case, repetitions)
    if artifact.SLOWED and os.path.exists({str(flag)!r}):
        result["samples_us"] = [3 * s for s in result["samples_us"]]
    return result
"""
    bundle = sleep_bundle(tmp_path / "bundle", sleep_s=0, cases=VECADD_CASES, harness_append=slowed)

    def back_to_c001(src: str) -> str:
        flag.touch()
        return re.sub(r"^BLOCK_SIZE = \d+", "BLOCK_SIZE = 256", src, flags=re.M).replace(
            f"\n{SLOW_MARK}\n", ""
        )

    fastest = set_block(512)
    scripted += [
        set_block(256),  # 820 us in the sleep harness against the baseline's 1000
        Step(knobs={"BLOCK_SIZE": 512}, edit=lambda s: fastest.edit(s) + f"\n{SLOW_MARK}\n"),
        Step(knobs={"BLOCK_SIZE": 256, "again": True}, edit=back_to_c001),  # a duplicate
    ]
    r = _optimize(tmp_path, bundle, "--max-rounds", "3", "--benchmark-repetitions", "6")
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["winner_id"] == "c001" and out["speedup"] > 1.1
    assert [_decision(tmp_path, c).outcome for c in ("c001", "c002", "c003")] == [
        "promoted",
        "promoted",
        "duplicate",
    ]
    store = Store(tmp_path / "s.duckdb")
    chain = queries.query(
        store, "SELECT candidate_id, survived FROM revalidations ORDER BY event_seq"
    ).to_pylist()
    assert chain == [
        {"candidate_id": "c002", "survived": False},
        {"candidate_id": "c001", "survived": True},
    ]
    assert "final revalidation: c002 did not survive, c001 did" in r.stderr


@pytest.mark.slow
def test_a_provider_that_only_proposes_measured_sources_is_stopped_with_its_own_reason(
    tmp_path, scripted
):
    """Every proposal is the untouched kernel again (a duplicate of the baseline): none is
    measured, and after 4 in a row the run stops with provider_repeating."""
    scripted += [
        Step(knobs={"attempt": i}, edit=lambda src: src, hypothesis="the same again")
        for i in range(10)
    ]
    bundle = sleep_bundle(tmp_path / "bundle", sleep_s=0, cases=VECADD_CASES)
    r = _optimize(tmp_path, bundle, "--max-rounds", "10", "--benchmark-repetitions", "4")
    assert r.exit_code == 2, r.stderr
    out = json.loads(r.stdout)
    assert out["stopping_reason"] == "provider_repeating"
    assert [e["outcome"] for e in out["experiments"]] == ["duplicate"] * 4
    sampled = {
        e.event.candidate_id
        for e in read_envelopes(tmp_path / "out")
        if e.type == "BenchmarkSampled"
    }
    assert sampled == {"baseline"}


LUCKY_MARK = "_THE_SAME_KERNEL = 1"  # a no-op constant: a new source, the same kernel


@pytest.mark.slow
@pytest.mark.parametrize("devices", [None, "all"], ids=["serial", "2 simulated devices"])
def test_an_instance_that_runs_fast_for_one_window_is_not_promoted(
    tmp_path, scripted, monkeypatch, devices
):
    """An A/A call on the H200 (docs/GUARDS.md "A second window before a promotion"): an
    instance of an unchanged kernel ran faster than the baseline's in every block of its window.
    Here the first instance a harness child builds of the candidate runs 10% fast: its window
    alone would promote it (and so would a revalidation, in a child of its own); the second
    window measures that instance again beside instances built again twice in the same child,
    which read 1.0x: the gap between the candidate's instances is measured, the interval over
    the pairs of instances carries it, and the candidate is rejected, with no winner. The same where
    the candidate is measured in a parallel run's worker (`--devices`), which asks for the
    second window from a copy of the run's state."""
    if devices is not None:
        monkeypatch.setenv("TLXDB_SIMULATED_DEVICES", "2")
    lucky = f"""

_build = build
_built = {{}}


def build(kernel_source, target):
    artifact = _build(kernel_source, target)
    _built[kernel_source] = _built.get(kernel_source, 0) + 1
    artifact.LUCKY = {LUCKY_MARK!r} in kernel_source and _built[kernel_source] == 1
    return artifact


_benchmark = benchmark


def benchmark(artifact, case, repetitions):
    result = _benchmark(artifact, case, repetitions)
    if artifact.LUCKY:
        result["samples_us"] = [0.9 * s for s in result["samples_us"]]
    return result
"""
    bundle = sleep_bundle(tmp_path / "bundle", sleep_s=0, cases=VECADD_CASES, harness_append=lucky)
    scripted.append(Step(knobs={"same": True}, edit=lambda s: s + f"\n{LUCKY_MARK}\n"))
    parallel = [] if devices is None else ["--devices", devices]
    r = _optimize(tmp_path, bundle, "--max-rounds", "1", "--benchmark-repetitions", "4", *parallel)
    assert r.exit_code == 2, r.stderr
    assert r.stderr.count("c001 second window: it and its references built again") == 1
    decided = _decision(tmp_path, "c001")
    assert decided.outcome == "rejected" and "CI lower bound" in decided.reason, decided
    assert decided.speedup == pytest.approx(0.9 ** (-1 / 3), abs=0.01)  # 1.11x, 1.0x and 1.0x
    assert any("sigma_I" in n and "df 4" in n for n in decided.notes), decided.notes
    assert decided.instance_df == 4 and len(decided.instance_pairs) == 3
    assert decided.instance_pairs[0] == pytest.approx(1 / 0.9, abs=0.01)
    store = Store(tmp_path / "s.duckdb")
    [row] = queries.query(
        store,
        "SELECT instance_df, instance_sigma, instance_pairs FROM decisions "
        "WHERE candidate_id = 'c001'",
    ).to_pylist()
    store.close()
    assert row == {
        "instance_df": 4,
        "instance_sigma": pytest.approx(decided.instance_sigma),
        "instance_pairs": pytest.approx(decided.instance_pairs),
    }
    sampled = [e.event for e in read_envelopes(tmp_path / "out")]
    windows = {
        (e.window_id, e.candidate_id)
        for e in sampled
        if e.type == "BenchmarkSampled" and e.phase == "round" and e.window_id != "baseline"
    }  # (a parallel run measures the baseline on its other device in a window of its own)
    assert windows == {(w, c) for w in ("c001", "c001.remeasure") for c in ("c001", "baseline")}
    second = {
        (e.candidate_id, e.instance)
        for e in sampled
        if e.type == "BenchmarkSampled" and e.window_id == "c001.remeasure"
    }
    assert second == {(c, i) for c in ("c001", "baseline") for i in (1, 2, 3)}
    builds = [e for e in sampled if e.type == "BuildFinished" and e.candidate_id == "c001"]
    assert len(builds) == 1  # built again for the second window without a build event of its own
