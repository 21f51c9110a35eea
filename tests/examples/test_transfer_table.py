"""benchmarks/transfer_tune.py --phase table: the cold-versus-warm summary rebuilt from what a
device call cut short after its cold run left behind (the H200 call of 2026-12-04 ended in its
alternated timing; benchmarks/results/h200_transfer_2026-12-04/ holds the table it gave)."""

from __future__ import annotations

import json
from pathlib import Path

from support.scripts import script

KNOBS = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8}
CASES = [
    {"case_id": "a", "parameters": {"M": 64, "N": 64, "K": 64, "dtype": "float16"}, "weight": 1.0},
    {"case_id": "b", "parameters": {"M": 32, "N": 64, "K": 64, "dtype": "float16"}, "weight": 1.0},
]


def _summary(label: str, final_us: dict[str, float], to_best: int) -> dict:
    return {
        "label": label,
        "run_id": f"r-{label}",
        "candidates": to_best + 3,
        "candidates_to_best": to_best,
        "stopping_reason": "max_rounds",
        "winner_id": "c001",
        "best_knobs": KNOBS,
        "cases": [{"case_id": c, "final_us": us} for c, us in final_us.items()],
    }


def _phase_folder(out: Path, warm_source: str, cold_source: str, warm_a_us: float) -> None:
    """The files a cold phase leaves: its result, its events, its bundle's cases, the first
    phase's summary and the warm winner's source."""
    (out / "bundles" / "cold" / "hopper").mkdir(parents=True)
    (out / "bundles" / "cold" / "hopper" / "cases.json").write_text(json.dumps(CASES))
    (out / "bundles" / "cold" / "tuple_gemm").mkdir(parents=True)
    (out / "bundles" / "cold" / "tuple_gemm" / "kernel.py").write_text("# the start\n")
    (out / "cold" / "experiments" / "c002").mkdir(parents=True)
    (out / "cold" / "experiments" / "c002" / "kernel.py").write_text(cold_source)
    experiments = [
        {"candidate_id": "c001", "hypothesis": "smaller tiles", "knobs": {}, "outcome": "rejected"},
        {"candidate_id": "c002", "hypothesis": "wider N", "knobs": KNOBS, "outcome": "promoted"},
    ]
    result = {
        "run_id": "r-cold",
        "success": True,
        "stopping_reason": "max_rounds",
        "winner_id": "c002",
        "speedup": 2.0,
        "experiments": experiments,
        "baseline": [{"case_id": "a", "median_us": 200.0}, {"case_id": "b", "median_us": 100.0}],
        "final": [{"case_id": "a", "median_us": 100.0}, {"case_id": "b", "median_us": 50.0}],
    }
    (out / "cold_result.json").write_text(json.dumps(result))
    stamps = ["2026-12-04T18:40:51+00:00", "2026-12-04T18:46:59.5+00:00"]
    (out / "cold" / "events.jsonl").write_text(
        "".join(json.dumps({"recorded_at": t}) + "\n" for t in stamps)
    )
    first = {
        "runs": [
            _summary("first", {"x": 10.0}, 12),
            _summary("warm", {"a": warm_a_us, "b": 49.0}, 1),
        ],
        "warm_seeds_from_first": [
            {"candidate_id": "c001", "from_run_id": "r-first", "knobs": KNOBS}
        ],
    }
    (out / "transfer_first.json").write_text(json.dumps(first))
    (out / "warm_best.py").write_text(warm_source)


def test_the_table_sets_the_warm_run_beside_the_cold_one_from_their_final_medians(tmp_path):
    _phase_folder(tmp_path, "# the winner\n", "# the winner\n", warm_a_us=101.0)
    done = script("transfer_tune.py", "--phase", "table", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((tmp_path / "transfer_summary.json").read_text())
    assert report["cold"]["run_id"] == "r-cold"
    assert report["cold"]["candidates_to_best"] == 2 and report["cold"]["seconds"] == 368.5
    assert [r["warm_over_cold"] for r in report["cases"]] == [1.01, 0.98]
    assert {r["basis"] for r in report["cases"]} == {"run final medians"}
    assert report["goal"]["met"] and report["goal"]["winners_one_source"]
    table = (tmp_path / "transfer_summary.md").read_text()
    assert "| warm / cold |  |  |  |  |  |  | 1.010 | 0.980 |" in table
    assert "one source (byte for byte)" in table


def test_a_warm_run_more_than_2pct_slower_or_another_source_is_said_so(tmp_path):
    _phase_folder(tmp_path, "# the warm winner\n", "# the cold winner\n", warm_a_us=103.0)
    done = script("transfer_tune.py", "--phase", "table", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((tmp_path / "transfer_summary.json").read_text())
    assert not report["goal"]["met"] and not report["goal"]["winners_one_source"]
    assert "not met" in (tmp_path / "transfer_summary.md").read_text()


def test_the_table_names_what_is_missing_and_writes_nothing(tmp_path):
    _phase_folder(tmp_path, "# w\n", "# w\n", warm_a_us=100.0)
    (tmp_path / "cold_result.json").unlink()
    done = script("transfer_tune.py", "--phase", "table", "--out", str(tmp_path))
    assert done.returncode == 1
    assert "missing" in done.stderr and "cold_result.json" in done.stderr
    assert not (tmp_path / "transfer_summary.json").exists()
