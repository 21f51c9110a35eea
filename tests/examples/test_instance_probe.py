"""The GEMM role-bias probes of issue 27, run as a user runs them on the interpreter:
aa_check.py --second-window always (every A/A candidate measured in a second window, each
instance's median in build order) and instance_order.py (copies of one kernel built one after
another in one process, timed in alternation outside tlxdb)."""

from __future__ import annotations

import json
from pathlib import Path

from support.scripts import script

REPO = Path(__file__).resolve().parents[2]
KERNEL = REPO / "tests/optimizer/providers/tune_corpus/tuple_gemm/kernel.py"
BUNDLE = REPO / "examples/matmul/host"
KNOBS = '{"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "GROUP_M": 8}'


def _cases(tmp_path: Path) -> Path:
    path = tmp_path / "cases.json"
    case = {"case_id": "16^3", "parameters": {"M": 16, "N": 16, "K": 16, "dtype": "float32"}}
    path.write_text(json.dumps([{**case, "weight": 1.0}]))
    return path


def test_aa_check_always_gives_a_second_window_and_reports_instances_in_build_order(tmp_path):
    out = tmp_path / "probe"
    done = script(
        "aa_check.py",
        *("--kernel", str(KERNEL), "--bundle", str(BUNDLE), "--cases", str(_cases(tmp_path))),
        *("--knobs", KNOBS, "--decisions", "1", "--second-window", "always", "--out", str(out)),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "aa_summary.json").read_text())
    assert summary["second_window"] == "always"
    (decision,) = summary["decisions"]
    instances = decision["instances"]
    assert [i["key"] for i in instances] == ["A", "R1", "A.2", "R1.2", "A.3", "R1.3"]
    assert [i["built"] for i in instances] == [1, 2, 3, 4, 5, 6]
    assert {i["member"] for i in instances} == {decision["candidate_id"], "baseline"}
    assert all(i["median_us"]["16^3"] > 0 for i in instances)
    assert "over 3 pairs of instances" in " ".join(decision["notes"])
    # the ncu veto's evidence per case: none on the interpreter (no ncu), and no veto
    assert decision["cases"][0]["ncu_ratio_beside"] is None and summary["counts"]["ncu_vetoes"] == 0
    assert (out / "export" / "manifest.json").is_file()


def test_instance_order_times_copies_in_alternation_against_the_first_built(tmp_path):
    out = tmp_path / "order.json"
    done = script(
        "instance_order.py",
        *("--kernel", str(KERNEL), "--bundle", str(BUNDLE), "--cases", str(_cases(tmp_path))),
        *("--knobs", KNOBS, "--instances", "3", "--rounds", "3", "--processes", "2"),
        *("--warm-up-s", "0", "--verify-first", "--out", str(out)),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("copy/first median ratio") == 2
    summary = json.loads(out.read_text())
    assert len(summary["processes"]) == 2
    for process in summary["processes"]:
        ratios = process["16^3"]["ratio_to_first"]
        assert len(ratios) == 3 and ratios[0] == 1.0 and all(r > 0 for r in ratios)
        assert len(process["16^3"]["median_us"]) == 3


def test_instance_order_refuses_fewer_than_two_copies(tmp_path):
    done = script(
        "instance_order.py", "--kernel", str(KERNEL), "--bundle", str(BUNDLE), "--instances", "1"
    )
    assert done.returncode == 2
    assert "--instances must be at least 2" in done.stderr
