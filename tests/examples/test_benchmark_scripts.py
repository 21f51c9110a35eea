"""benchmarks/hopper_sweep.py and hopper_tune.py, run on the CPU with `--target host`: the same
code paths as on an H200 except the GPU references (copy, torch ops), which need CUDA; and the
store benchmarks' generated big store with upgrade_bench.py, at a small scale."""

from __future__ import annotations

import json
import sys

import pytest
from support.scripts import REPO, script

from tlxstore.store.schema import STORE_SCHEMA_VERSION


def test_the_sweep_measures_every_configuration_of_its_grid_and_names_the_best(tmp_path):
    done = script(
        "hopper_sweep.py",
        "--out",
        str(tmp_path),
        "--target",
        "host",
        "--examples",
        "rmsnorm",
        "--repetitions",
        "2",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "sweep_rmsnorm_host.json").read_text())
    assert result["configurations"] == 3 and result["failed"] == 0
    assert [e["knobs"]["BLOCK"] for e in result["entries"]] == [256, 1024, 4096]
    for entry in [result["untuned"], *result["entries"]]:
        assert entry["verified"]
        for case in entry["cases"].values():
            assert len(case["samples_us"]) == 2 and case["bytes_per_s"] > 0
    assert result["best"]["knobs"]["BLOCK"] in (1024, 4096)
    assert result["best"]["speedup_vs_untuned"] > 1
    summary = json.loads((tmp_path / "sweep_summary_host.json").read_text())
    assert summary["environment"]["TRITON_INTERPRET"] == "1"


def test_the_sweep_on_the_host_target_needs_the_interpreter(tmp_path):
    done = script("hopper_sweep.py", "--out", str(tmp_path), "--target", "host", interpret=False)
    assert done.returncode == 1 and "TRITON_INTERPRET=1" in done.stderr


@pytest.mark.slow
def test_the_tune_script_runs_tlxdb_optimize_and_reports_start_final_and_candidates(
    softmax_tune_run,
):
    done, out = softmax_tune_run  # hopper_tune.py --target host --examples softmax
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((out / "tune_summary_host.json").read_text())
    (softmax,) = report["examples"]
    assert softmax["exit_code"] == 0 and softmax["stopping_reason"] == "search_exhausted"
    assert softmax["best_knobs"]["BLOCK"] == 4096 and softmax["candidates_to_best"] == 2
    for case in softmax["cases"]:
        assert case["final_us"] < case["start_us"]
        assert 0 < case["final_fraction_of_facts_copy"] < 1
    assert "| softmax | 2x4096 |" in done.stdout
    assert (out / "softmax_log.txt").read_text().count("PROMOTED") >= 2
    assert json.loads((out / "softmax_result.json").read_text())["run_id"] == softmax["run_id"]


def test_the_ceiling_is_torch_matmul_for_the_matmul_and_a_copy_otherwise():
    """hopper_sweep.ceiling_call: the denominator of every fraction references() and
    hopper_tune's alternated timing report (run here on CPU tensors)."""
    import torch

    sys.path.insert(0, str(REPO / "benchmarks"))
    from hopper_sweep import ceiling_call

    fn, (a, b) = ceiling_call("matmul", {"M": 8, "N": 4, "K": 16, "dtype": "float32"}, "cpu")
    assert fn is torch.matmul and a.shape == (8, 16) and b.shape == (16, 4)
    for example in ("softmax", "rmsnorm"):
        fn, (dst, src) = ceiling_call(example, {"n_rows": 3, "n_cols": 32}, "cpu")
        assert src.dtype == torch.bfloat16 and src.shape == dst.shape == (3, 32)
        fn(dst, src)
        assert torch.equal(dst, src)


def test_the_big_store_generator_writes_the_current_schema_and_the_upgrade_bench_upgrades_it(
    tmp_path,
):
    """store_bench.py's generated store (store_bench_big_store.sql) fills every column of the
    current projections (it broke when store schema v9 added the samples' instance), and
    upgrade_bench.py times its upgrade from v8 to the current schema and finds every sample's
    instance after it."""
    out = tmp_path / "upgrade.json"
    done = script(
        "upgrade_bench.py", "--scale", "0.001", "--workdir", str(tmp_path), "--out", str(out)
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["rows_proj_samples"] == 10 * 100 * 10
    assert result["samples_without_instance"] == 0
    assert result["schema_version_after"] == str(STORE_SCHEMA_VERSION)
    assert result["upgraded_from"] == 8 and result["upgrade_s"] > 0


def test_a_memory_bound_goal_is_judged_on_the_copy_timed_beside_it_on_the_same_card():
    """hopper_tune.summarize with an alternated timing: the softmax goal (0.90 of a copy) is
    judged on the copy timed in alternation on the card it ran on, not on the H200's 4.24 TB/s of
    docs/MEASUREMENTS.md. The H100 run of 2026-12-05 (h100_noise_2026-12-05) reached its copy's
    speed, 0.69 of the H200's, and was reported as missing its goal."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from hopper_tune import summarize

    case = {"case_id": "16384x8192", "parameters": {"n_rows": 16384, "n_cols": 8192}}
    experiment = {"candidate_id": "c003", "outcome": "promoted", "knobs": {"BLOCK": 8192}}
    run = {
        "exit_code": 0,
        "seconds": 386.5,
        "result": {
            "run_id": "r1",
            "winner_id": "c003",
            "experiments": [experiment],
            "baseline": [{"case_id": "16384x8192", "median_us": 299.7}],
            "final": [{"case_id": "16384x8192", "median_us": 182.4}],
        },
    }
    refs = {"16384x8192": {"copy_us": 182.6}}
    alternated = {"16384x8192": {"reference": 182.4, "start": 298.0, "final": 182.7}}
    on_card = summarize("softmax", [case], run, refs, alternated)
    (row,) = on_card["cases"]
    assert round(row["final_fraction_of_facts_copy"], 2) == 0.69
    assert on_card["goal"]["metric"] == "fraction_of_copy_alternated" and on_card["goal"]["met"]
    without_gpu = summarize("softmax", [case], run, {})
    assert without_gpu["goal"]["metric"] == "fraction_of_facts_copy"
    assert not without_gpu["goal"]["met"]
