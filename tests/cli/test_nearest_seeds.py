"""Must show (issue 30): a second run of the softmax example under a new measurement identity
starts from the first run's winner. Run 1 on two one-row cases; run 2 with new shapes: its c001
is run 1's winner configuration and its evidence names run 1; run 2 with another dtype: the seed
is measured and the local search goes on after it; run 2 under another Triton version (another
measurement key) is seeded from run 1 too. Real `tlxdb optimize` runs through the CLI on the
Triton interpreter (the host bundle, one or two rounds), a real store."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.softmax_runs import BUDGET, EXAMPLE, optimize, run_candidates

import queries
from cli.main import main
from optimizer.run import lifecycle
from tlxstore.store import Store

pytestmark = pytest.mark.slow


def _cases(*shapes: tuple[int, int], dtype: str = "float32") -> list[dict]:
    return [
        {"case_id": f"{r}x{c}", "parameters": {"n_rows": r, "n_cols": c, "dtype": dtype}}
        for r, c in shapes
    ]


def _optimize(tmp: Path, name: str, store: Path, cases: list[dict], *flags: str, **budget) -> dict:
    bundle = tmp / f"bundle-{name}"
    shutil.copytree(EXAMPLE / "host", bundle)
    (bundle / "budget.json").write_text(json.dumps({**BUDGET, **budget}))
    (bundle / "cases.json").write_text(json.dumps(cases))
    return optimize(bundle, store, tmp / f"out-{name}", *flags)


@pytest.fixture(scope="module")
def first_run(tmp_path_factory) -> tuple[Path, dict, dict]:
    """Run 1 on 1x1024 and 1x800: the store (to copy), the run and its winner."""
    tmp = tmp_path_factory.mktemp("first")
    store = tmp / "store.duckdb"
    run = _optimize(tmp, "r1", store, _cases((1, 1024), (1, 800)))
    assert run["winner_id"] and run["winner_id"] != "baseline", run
    (winner,) = [
        c for c in run_candidates(store, run["run_id"]) if c["candidate_id"] == run["winner_id"]
    ]
    return store, run, winner


def _copy(first_run, tmp_path: Path) -> Path:
    store = tmp_path / "store.duckdb"
    shutil.copy(first_run[0], store)
    return store


def test_new_shapes_start_from_the_first_runs_winner(first_run, tmp_path):
    _, run1, winner = first_run
    store = _copy(first_run, tmp_path)
    run2 = _optimize(tmp_path, "r2", store, _cases((1, 2048), (1, 512)), max_rounds=1)
    (c001,) = run_candidates(store, run2["run_id"])
    assert c001["knobs"] == winner["knobs"]
    assert f"run {run1['run_id']}, {run1['winner_id']}" in c001["evidence"]
    assert "bundle: cases 1x1024, 1x800 → 1x2048, 1x512; same device" in c001["evidence"]
    assert c001["remeasures"] == f"{run1['run_id']}/{run1['winner_id']}"
    assert c001["outcome"] in ("promoted", "rejected")  # re-measured here, not answered


def test_a_seed_from_another_dtype_is_measured_then_the_local_search_takes_over(
    first_run, tmp_path
):
    _, run1, winner = first_run
    store = _copy(first_run, tmp_path)
    cases = _cases((1, 1024), (1, 800), dtype="float16")
    run2 = _optimize(tmp_path, "r2", store, cases, history_seeds=1)
    c001, c002 = run_candidates(store, run2["run_id"])
    assert c001["knobs"] == winner["knobs"] and "case parameters changed" in c001["evidence"]
    assert c001["outcome"] in ("promoted", "rejected")
    assert not c002["evidence"].startswith("nearest history")  # one seed, then the search
    assert c002["knobs"] != c001["knobs"]


def test_another_triton_version_is_seeded_from_the_old_run(first_run, tmp_path, monkeypatch):
    _, run1, winner = first_run
    store = _copy(first_run, tmp_path)
    real = lifecycle.tool_versions
    monkeypatch.setattr(
        lifecycle, "tool_versions", lambda: real().model_copy(update={"triton": "9.9.0"})
    )
    run2 = _optimize(tmp_path, "r2", store, _cases((1, 1024), (1, 800)), max_rounds=1)
    keys = queries.query(
        Store(store),
        "SELECT run_id, measurement_key FROM runs WHERE run_id IN ($a, $b)",
        {"a": run1["run_id"], "b": run2["run_id"]},
    ).column("measurement_key")
    assert len(set(keys.to_pylist())) == 2  # another measurement identity
    (c001,) = run_candidates(store, run2["run_id"])
    assert c001["knobs"] == winner["knobs"]
    assert f"run {run1['run_id']}" in c001["evidence"]
    assert "same bundle; same device; Triton " in c001["evidence"] and "→ 9.9.0" in c001["evidence"]


def test_after_a_triton_upgrade_remeasure_re_measures_the_best_known_and_history_shows_both(
    first_run, tmp_path, monkeypatch
):
    """Issue 30 item 4: `--provider remeasure` without a run re-measures the kernel's best-known
    configurations under the new identity; history's Sources table shows each before and after."""
    _, run1, winner = first_run
    store = _copy(first_run, tmp_path)
    real = lifecycle.tool_versions
    monkeypatch.setattr(
        lifecycle, "tool_versions", lambda: real().model_copy(update={"triton": "9.9.0"})
    )
    bundle_cases = _cases((1, 1024), (1, 800))
    run2 = _optimize(tmp_path, "r2", store, bundle_cases, "--provider", "remeasure", max_rounds=4)
    again = run_candidates(store, run2["run_id"])
    promoted1 = [c for c in run_candidates(store, run1["run_id"]) if c["outcome"] == "promoted"]
    assert again and len(again) <= len(promoted1)
    assert {c["remeasures"] for c in again} <= {
        f"{run1['run_id']}/{c['candidate_id']}" for c in promoted1
    }
    assert again[0]["knobs"] == winner["knobs"]  # the best known first
    done = CliRunner().invoke(
        main, ["history", "softmax_kernel", "--store", str(store), "--to", str(tmp_path / "h")]
    )
    assert done.exit_code == 0, done.output
    report = (tmp_path / "h" / "report.md").read_text()
    (source,) = [
        r["source_hash"]
        for r in queries.query(
            Store(store),
            "SELECT source_hash FROM candidates WHERE run_id = $r AND candidate_id = $c",
            {"r": run1["run_id"], "c": run1["winner_id"]},
        ).to_pylist()
    ]
    rows = [ln for ln in report.splitlines() if source[:19] in ln and "/ " in ln]
    versions = {ln.strip().strip("|").split("|")[-1].strip().split(" / ")[0] for ln in rows}
    assert "9.9.0" in versions and len(versions) == 2, rows  # before and after the upgrade
