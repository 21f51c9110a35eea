"""The machine as evidence, through the real CLI: a run on the interpreter whose harness children
read NVML from the recorded trace (TLXDB_NVML_TRACE) records the GPU's state for every benchmark
call, leaves out and measures again what ran throttled or shared, says so once per candidate,
revalidates its winner in independent replicates; `report` and `history` warn where runs
compared side by side differ in their environment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.bundles import VECADD_CASES, kernel_copy, sleep_bundle
from support.machine import NVML_TRACE
from support.scripted_provider import set_block

from cli.main import main
from tlxstore.events import BenchmarkSampled, MachineSampled, RunEnvironment
from tlxstore.runlog import RunLog, read_envelopes
from tlxstore.testing import small_run

MARKED = "a benchmark call ran while the GPU throttled or was shared"


def _invoke(args: list[str]):
    return CliRunner().invoke(main, args, catch_exceptions=False)


@pytest.mark.slow
def test_a_run_records_the_gpu_for_every_call_leaves_out_what_ran_throttled_and_replicates(
    tmp_path, scripted, monkeypatch
):
    monkeypatch.setenv("TLXDB_NVML_TRACE", str(NVML_TRACE))
    scripted.append(set_block(512))  # 600 us in the sleep harness against the baseline's 1000
    bundle = sleep_bundle(tmp_path / "bundle", sleep_s=0, cases=VECADD_CASES[:1])
    store = str(tmp_path / "s.duckdb")
    r = _invoke(
        [
            "optimize", "--kernel", str(kernel_copy(tmp_path / "src")), "--bundle", str(bundle),
            "--store", store, "--output-dir", str(tmp_path / "out"), "--provider", "scripted",
            "--max-rounds", "1", "--candidates-per-round", "1", "--benchmark-repetitions", "4",
            "--max-cv", "5", "--no-commit-winner", "--replicates", "3",
        ]
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    events = [e.event for e in read_envelopes(tmp_path / "out")]
    # one state per benchmark call, right after its samples, in every window
    for i, e in enumerate(events):
        if isinstance(e, BenchmarkSampled):
            after = events[i + 1]
            assert isinstance(after, MachineSampled)
            assert (after.candidate_id, after.case_id, after.window_id, after.block) == (
                e.candidate_id, e.case_id, e.window_id, e.block,
            )  # fmt: skip
    windows = {e.window_id for e in events if isinstance(e, MachineSampled)}
    # c001's first window would promote it: it is measured again in a second window first
    assert windows == {
        "baseline", "c001", "c001.remeasure", "c001.replicate2", "c001.replicate3",
    }  # fmt: skip
    # each window's third call (the trace's hardware slowdown) was measured again
    extra = {(e.window_id, e.block) for e in events if isinstance(e, BenchmarkSampled) and e.extra}
    assert {("c001", 2), ("c001", 3)} <= extra
    # the live log says it once per candidate (and once per replicate), the decision counts them
    said = [ln for ln in r.stderr.splitlines() if MARKED in ln]
    assert [ln.split(":")[0] for ln in said] == [
        "c001",
        "c001.remeasure (second window)",
        "c001 (final revalidation)",
        "c001.replicate2 (final revalidation)",
        "c001.replicate3 (final revalidation)",
    ]
    assert "note: 2 of 8 benchmark calls ran while the GPU throttled or was shared" in r.stderr
    [env] = [e for e in events if isinstance(e, RunEnvironment)]
    driver = json.loads(NVML_TRACE.read_text())["device"]["driver_version"]
    assert env.source == "recorded" and env.driver_version == driver
    assert f"environment (recorded trace, for testing): NVIDIA H200 driver {driver}" in r.stderr
    # three replicates in fresh children agree (the sleep harness's samples are fixed)
    [reval] = [e for e in events if e.type == "FinalistRevalidated"]
    assert reval.survived and len(reval.replicate_speedups) == 3
    assert any(n.startswith("3 replicates in fresh children agree") for n in reval.notes)
    # the documented question, through the CLI
    q = _invoke(
        ["query", "SELECT window_id, candidate_id, block, throttled, shared FROM machine_states "
         "WHERE marked AND window_id = 'c001' AND phase = 'round' ORDER BY block", "--store", store, "--format", "json"]
    )  # fmt: skip
    assert json.loads(q.stdout) == [
        {"window_id": "c001", "candidate_id": "baseline", "block": 1, "throttled": True, "shared": False},
        {"window_id": "c001", "candidate_id": "c001", "block": 2, "throttled": False, "shared": True},
    ]  # fmt: skip
    run_id = json.loads(r.stdout)["run_id"]
    rep = _invoke(["report", run_id, "--store", store, "--to", str(tmp_path / "rep")])
    md = (tmp_path / "rep" / "report.md").read_text()
    assert (
        rep.exit_code == 0 and "## Benchmark calls left out (the GPU throttled or was shared)" in md
    )
    assert "| baseline | n2048 | round | c001 | 1 |" in md


def _imported_run(
    tmp: Path, run_id: str, env: RunEnvironment, store: str, priors: tuple[str, ...] = ()
) -> None:
    events = small_run(1, tag=run_id)
    log = RunLog.create(tmp / run_id, run_id)
    log.append([events[0].model_copy(update={"prior_runs": list(priors)}), env, *events[1:]])
    assert _invoke(["import", str(tmp / run_id), "--store", store]).exit_code == 0


def test_report_and_history_warn_where_runs_side_by_side_differ_in_their_environment(tmp_path):
    store = str(tmp_path / "s.duckdb")
    base = RunEnvironment(
        source="nvml", driver_version="580.159.04", persistence_mode=True, power_limit_w=700.0,
        cpu_affinity=list(range(16)), application_sm_clock_mhz=1980,
    )  # fmt: skip
    _imported_run(tmp_path, "r-first", base, store)
    # the same but for the power limit, and a governor the first could not read (no difference)
    changed = base.model_copy(update={"power_limit_w": 600.0, "cpu_governor": "performance"})
    _imported_run(tmp_path, "r-second", changed, store, priors=("r-first",))
    hist = _invoke(["history", "sha256:bundle", "--store", store, "--to", str(tmp_path / "h")])
    assert hist.exit_code == 0, hist.stderr
    warning = (
        "WARNING: runs compared here on cpu-interpreter differ in power_limit_w: "
        "700 (r-first); 600 (r-second)"
    )
    assert hist.stderr.strip().splitlines() == [warning]
    assert f"- {warning}" in (tmp_path / "h" / "report.md").read_text()
    # a run's report compares it with its prior runs
    rep = _invoke(["report", "r-second", "--store", store, "--to", str(tmp_path / "r2")])
    assert rep.exit_code == 0 and rep.stderr.strip().splitlines() == [warning]
    assert f"- {warning}" in (tmp_path / "r2" / "report.md").read_text()
    alone = _invoke(["report", "r-first", "--store", store, "--to", str(tmp_path / "r1")])
    assert alone.exit_code == 0 and "WARNING" not in alone.stderr  # no prior run: no comparison
