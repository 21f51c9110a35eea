"""The winner's commit message, the request built from a run's events, and the three-way merge."""

from __future__ import annotations

import shutil

import pytest

from optimizer.decision.stats import cv
from optimizer.vcs.commit import request_for_run
from optimizer.vcs.merge import MergeTool, merge3
from optimizer.vcs.message import TRAILER, change_summary, commit_subject, render_commit_message
from tlxstore.events import (
    BenchmarkSampled,
    CandidateProposed,
    CaseSpeedup,
    FinalistRevalidated,
    Phase,
    SourceStored,
)
from tlxstore.fold import fold
from tlxstore.hashing import digest_text
from tlxstore.runlog import RunLog

CASES = [
    CaseSpeedup(
        case_id="small",
        weight=1.0,
        baseline_median_us=10.0,
        candidate_median_us=8.0,
        speedup=1.25,
        candidate_cv=0.01,
        baseline_cv=0.0234,
    ),
    CaseSpeedup(
        case_id="a-much-longer-case-name",
        weight=2.0,
        baseline_median_us=1234.5,
        candidate_median_us=1000.0,
        speedup=1.2345,
        candidate_cv=0.05,
    ),
]


def test_subject_prefers_the_users_message_then_the_candidates_title_then_a_default() -> None:
    assert commit_subject("k/softmax.py", commit_message="Mine", commit_title="Theirs") == "Mine"
    assert commit_subject("k/softmax.py", commit_title="Use 16 warps") == "Use 16 warps"
    assert commit_subject("k/softmax.py", speedup=1.2345) == "Speed up softmax.py by 1.234x (tlxdb)"
    assert commit_subject("k/softmax.py") == "Optimize softmax.py (tlxdb)"
    assert commit_subject("k/softmax.py", commit_message="  \n", commit_title="") == (
        "Optimize softmax.py (tlxdb)"
    )


def test_subject_is_the_first_non_empty_line() -> None:
    assert commit_subject("k.py", commit_message="\n  Tune   BLOCK \nmore text") == "Tune BLOCK"


def test_message_has_summary_table_aggregate_and_ends_with_the_trailer_once() -> None:
    msg = render_commit_message(
        "Tune softmax",
        summary=f"Raise num_warps to 16.\n{TRAILER}\n",
        cases=CASES,
        speedup=1.2234,
        ci_low=1.1,
        ci_high=1.3,
    )
    lines = msg.rstrip("\n").splitlines()
    assert lines[0] == "Tune softmax"
    assert lines[1] == ""
    assert lines[-1] == TRAILER
    assert msg.count(TRAILER) == 1
    assert "Raise num_warps to 16." in msg
    header = next(line for line in lines if line.startswith("case"))
    assert header.split() == [
        "case",
        "baseline",
        "us",
        "winner",
        "us",
        "speedup",
        "baseline",
        "CV",
        "winner",
        "CV",
    ]
    small = next(line for line in lines if line.startswith("small"))
    assert small.split() == ["small", "10.000", "8.000", "1.250x", "2.34%", "1.00%"]
    long = next(line for line in lines if line.startswith("a-much-longer"))
    assert long.split() == [
        "a-much-longer-case-name",
        "1234.500",
        "1000.000",
        "1.234x",
        "n/a",
        "5.00%",
    ]
    # Fixed width: every number column ends at the same place.
    assert len(small) == len(long)
    assert "Weighted geometric-mean speedup: 1.223x (confidence interval 1.100x to 1.300x)" in lines


def test_trailer_in_the_subject_is_not_repeated() -> None:
    msg = render_commit_message(TRAILER + "\nreal subject")
    assert msg.splitlines()[0] == "real subject"
    assert msg.count(TRAILER) == 1


def test_change_summary_labels_what_the_candidate_said() -> None:
    p = CandidateProposed(
        candidate_id="c001",
        parent_id="baseline",
        round=1,
        provider="tune",
        hypothesis="More warps hide latency",
        change="num_warps 4 -> 16",
        risk="",
        source_hash="sha256:x",
        normalized_hash="sha256:y",
    )
    assert change_summary(p) == "Hypothesis: More warps hide latency\nChange: num_warps 4 -> 16"


BASE = b"".join(f"line {i}\n".encode() for i in range(1, 11))
OURS = BASE.replace(b"line 2\n", b"line 2 (user)\n")
THEIRS = BASE.replace(b"line 9\n", b"line 9 (agent)\n")

TOOLS = [
    MergeTool.GIT,
    pytest.param(
        MergeTool.DIFF3,
        marks=pytest.mark.skipif(shutil.which("diff3") is None, reason="diff3 not installed"),
    ),
]


@pytest.mark.parametrize("tool", TOOLS)
def test_merge_applies_the_agents_change_to_the_users_text(tool: MergeTool) -> None:
    res = merge3(BASE, OURS, THEIRS, tool)
    assert res.clean
    assert res.text == BASE.replace(b"line 2\n", b"line 2 (user)\n").replace(
        b"line 9\n", b"line 9 (agent)\n"
    )


@pytest.mark.parametrize("tool", TOOLS)
def test_merge_of_overlapping_changes_is_a_conflict(tool: MergeTool) -> None:
    res = merge3(BASE, BASE.replace(b"line 9\n", b"line 9 (user)\n"), THEIRS, tool)
    assert not res.clean and res.text is None


@pytest.mark.parametrize("tool", TOOLS)
def test_merge_keeps_a_file_without_final_newline(tool: MergeTool) -> None:
    base = BASE.rstrip(b"\n")
    res = merge3(
        base, base.replace(b"line 1\n", b"line one\n"), base.replace(b"line 10", b"x"), tool
    )
    assert res.text == base.replace(b"line 1\n", b"line one\n").replace(b"line 10", b"x")


def test_a_runs_commit_request_comes_from_its_events(tmp_path) -> None:
    base, winner = "BLOCK = 64\n", "BLOCK = 1024\n"
    events = []
    for cid, parent, text, title in (
        ("baseline", None, base, None),
        ("c001", "baseline", winner, "Widen blocks"),
    ):
        h = digest_text(text)
        events += [
            SourceStored(source_hash=h, normalized_hash=h, text=text, size_bytes=len(text)),
            CandidateProposed(
                candidate_id=cid,
                parent_id=parent,
                round=0 if parent is None else 1,
                provider="tune",
                hypothesis="wider blocks",
                change="BLOCK 64 -> 1024",
                commit_title=title,
                source_hash=h,
                normalized_hash=h,
            ),
        ]
    fresh_baseline_us = [10.0, 11.0, 12.0, 10.5]
    events += [
        BenchmarkSampled(candidate_id="baseline", case_id="small", samples_us=[50.0, 9.0]),
        BenchmarkSampled(
            candidate_id="baseline",
            case_id="small",
            phase=Phase.REVALIDATION,
            samples_us=fresh_baseline_us,
        ),
        FinalistRevalidated(
            candidate_id="c001",
            survived=True,
            reason="faster",
            speedup=1.25,
            ci_low=1.2,
            ci_high=1.3,
            alternations=3,
            cases=[CASES[0].model_copy(update={"baseline_cv": cv(fresh_baseline_us)})],
        ),
    ]
    log = RunLog.create(tmp_path / "run", "r1")
    log.append(events)
    state = fold(log.envelopes())
    req = request_for_run(state, "c001", tmp_path / "k.py", None, lambda _src: True)
    assert (req.base_source, req.winner_source) == (base, winner)
    assert req.subject == "Widen blocks"
    assert req.summary == "Hypothesis: wider blocks\nChange: BLOCK 64 -> 1024"
    assert (req.speedup, req.ci_low, req.ci_high) == (1.25, 1.2, 1.3)
    # The table is the revalidation's: the fresh baseline measured beside the finalist.
    assert req.cases[0].baseline_cv == pytest.approx(cv(fresh_baseline_us))
    assert request_for_run(state, "c001", tmp_path / "k.py", "Mine", lambda _s: True).subject == (
        "Mine"
    )
