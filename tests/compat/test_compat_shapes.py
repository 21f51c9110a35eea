"""Harness shapes the TLX agent accepts, run through `tlxdb optimize`: a dict artifact holding a
TemporaryDirectory, a bool verify, the three-argument profile with the structured request and a
real per-case artifacts_dir, nulls with a diagnostic, and a payload over 1 MB spilled to a file.
One run serves every test of this module."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from compat_cli import bundle, experiments, import_as_tlx, invoke, kernel
from support.scripted_provider import ScriptedProvider, set_block

from optimizer.providers import registry
from tlxstore.events import BundleValidated, CheckOutcome, ProfileCollected
from tlxstore.store import Store

FAST = ["--benchmark-repetitions", "5", "--max-cv", "5", "--max-candidate-seconds", "120"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("structured")
    registry.register("scripted-shapes", lambda options: ScriptedProvider([set_block(256)]))
    try:
        r = invoke(
            [
                "optimize",
                "--kernel",
                kernel("vecadd.py", tmp / "src"),
                "--bundle",
                bundle("structured", tmp),
                "--store",
                tmp / "s.duckdb",
                "--output-dir",
                tmp / "out",
                "--provider",
                "scripted-shapes",
                "--max-rounds",
                "1",
                "--candidates-per-round",
                "1",
                "--no-commit-winner",
                *FAST,
            ]
        )
    finally:
        registry.unregister("scripted-shapes")
    assert r.exit_code in (0, 2), r.stderr
    result = json.loads(r.stdout)
    envelopes = Store(tmp / "s.duckdb").run_envelopes(result["run_id"])
    return {"result": result, "out": tmp / "out", "events": [e.event for e in envelopes], "r": r}


def _harness_profiles(events) -> list[ProfileCollected]:
    return [
        e
        for e in events
        if isinstance(e, ProfileCollected) and all(m.source == "harness" for m in e.metrics)
    ]


def test_the_structured_profile_gets_a_real_per_case_artifacts_dir(run):
    out = run["out"]
    for cid in ("baseline", "c001"):
        for case in ("n2048", "n1000"):
            folder = out / "experiments" / cid / "profile" / cid / case
            assert json.loads((folder / "trace.json").read_text())["case"] == case


def test_a_profile_payload_over_1_mb_is_spilled_to_a_file(run):
    profiles = _harness_profiles(run["events"])
    assert {(p.candidate_id, p.case_id) for p in profiles} == {
        ("baseline", "n2048"),
        ("baseline", "n1000"),
        ("c001", "n2048"),
        ("c001", "n1000"),
    }
    for p in profiles:
        [raw] = [Path(a) for a in p.artifacts if a.endswith("raw_profile.json")]
        assert raw.parent.name == p.case_id and raw.stat().st_size > 1_000_000
        kept = json.loads(raw.read_text())
        assert kept["proton"] is None and kept["note"] == "no GPU profiler on this host"
        assert {m.name: m.value for m in p.metrics}["size_bytes"] > 1_000_000


def test_a_profile_of_nulls_warns_and_the_run_goes_on(run):
    assert run["r"].stderr.count("warning: baseline:profile: ") == 1
    assert run["result"]["experiments"][0]["candidate_id"] == "c001"
    [validated] = [e for e in run["events"] if isinstance(e, BundleValidated)]
    assert validated.passed and not validated.strict
    assert [(c.name, c.outcome) for c in validated.warnings] == [
        ("baseline:profile", CheckOutcome.WARN)
    ]
    [warning] = validated.warnings
    assert warning.detail.startswith("the harness's profile attributes time to no kernel: ")
    assert f"warning: baseline:profile: {warning.detail}" in run["r"].stderr.splitlines()


EXPERIMENT_FIELDS = {
    "experiment_id",
    "round_index",
    "parent_id",
    "status",
    "source_path",
    "incremental_patch_path",
    "cumulative_patch_path",
    "performance",
    "diagnostics",
    "mutation_summary",
    "hypothesis",
    "evidence",
    "expected_effect",
    "risk",
    "commit_title",
    "commit_summary",
    "profile_path",
}


def test_the_output_folder_holds_the_tlx_agents_files(run):
    out = run["out"]
    items = json.loads((out / "experiments.json").read_text())
    assert [i["experiment_id"] for i in items] == ["baseline", "c001"]
    assert all(set(i) >= EXPERIMENT_FIELDS for i in items)
    base, c001 = items
    assert base["status"] == "baseline" and base["round_index"] == 0
    assert c001["status"] == run["result"]["experiments"][0]["outcome"]
    assert c001["parent_id"] == "baseline" and c001["round_index"] == 1
    assert Path(c001["source_path"]).read_text() == (out / "experiments/c001/kernel.py").read_text()
    assert Path(c001["cumulative_patch_path"]).is_file()
    for item in items:
        for case in item["performance"]["cases"]:
            assert case["verification"]["passed"] is True
            assert all(s > 0 for s in case["timing"]["samples_us"])
    assert json.loads((out / "experiments/c001/result.json").read_text()) == c001
    assert json.loads((out / "experiments/baseline/result.json").read_text()) == base["performance"]
    assert set(json.loads((out / "baseline_profile.json").read_text())) == {"n2048", "n1000"}
    best = "c001" if run["result"]["winner_id"] else "baseline"
    assert json.loads((out / "best_profile.json").read_text()) == json.loads(
        (out / f"experiments/{best}/profile.json").read_text()
    )


def test_the_folder_read_as_a_tlx_agent_folder_gives_the_same_experiments(run, tmp_path):
    store, imported = import_as_tlx(run["out"], tmp_path)
    original = experiments(run["out"].parent / "s.duckdb", run["result"]["run_id"])
    assert list(original) == ["baseline", "c001"]
    assert experiments(store, imported) == original


def test_the_structured_bundle_validates_with_its_profile_warning_once(tmp_path):
    r = invoke(
        [
            "validate",
            "--kernel",
            kernel("vecadd.py", tmp_path / "src"),
            "--bundle",
            bundle("structured", tmp_path),
            *FAST,
        ]
    )
    assert r.exit_code == 0, r.stderr
    rows = {ln.split()[1]: ln.split()[0] for ln in r.stdout.splitlines()[1:]}
    assert rows["baseline:profile"] == "WARN" and rows["negative:wrong_output"] == "PASS"
    assert "FAIL" not in rows.values()
    assert r.stderr.count("warning: baseline:profile: ") == 1
