"""Must show (issue 27, item 5): two runs of the softmax example on one store; the second
measures no configuration known to be worse than another known one as its start, and `tlxdb
history` shows one pooled figure per source, with its CI. Real `tlxdb optimize` runs through the
CLI on the Triton interpreter (the host bundle with a two-round budget and one-row cases, so that
each run takes seconds, most of them validation's), a real store."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from click.testing import CliRunner
from support.softmax_runs import BUDGET, EXAMPLE, optimize

import queries
from cli.main import main
from optimizer.decision.pooling import Measurement, pool_by
from tlxstore.store import Store

pytestmark = pytest.mark.slow

CASES = [
    {"case_id": "1x1024", "parameters": {"n_rows": 1, "n_cols": 1024, "dtype": "float32"}},
    {"case_id": "1x800", "parameters": {"n_rows": 1, "n_cols": 800, "dtype": "float32"}},
]
FIGURE = re.compile(r"^\d[\d.e+]*x \[[\d.e+]+, [\d.e+]+\], \d+ measurements?$")


def _starts_were_the_best_known(store: Store, run_id: str) -> list[str]:
    """Each candidate of `run_id` that re-measured a source measured before it was proposed (a
    best known start): it must have been the best known by pooled estimate then, the baseline
    (1x) included. Returns those candidates."""
    rows = queries.query(
        store,
        "SELECT run_id, candidate_id, source_hash, outcome, decided_speedup, ci_low, ci_high, "
        "decided_at, proposed_at, remeasures FROM candidates WHERE candidate_id <> 'baseline' "
        "ORDER BY proposed_at",
    ).to_pylist()
    starts = []
    for c in (r for r in rows if r["run_id"] == run_id):
        before = [
            r
            for r in rows
            if r["decided_at"] is not None
            and r["decided_at"] < c["proposed_at"]
            and r["outcome"] in ("promoted", "rejected")
            and r["decided_speedup"]
        ]
        known = pool_by(
            (r["source_hash"], Measurement(r["decided_speedup"], r["ci_low"], r["ci_high"]))
            for r in before
        )
        if c["source_hash"] not in known:
            continue  # a configuration never measured: the search, not a start
        starts.append(c["candidate_id"])
        assert c["remeasures"], c  # re-measured on purpose, as a start
        mine = known[c["source_hash"]].speedup
        assert mine > 1.0 and all(mine >= e.speedup for e in known.values()), (c, known)
    return starts


def _figures(report: str) -> dict[str, set[str]]:
    """Every table row's figure beside a source hash: {short source hash: the figures shown}."""
    out: dict[str, set[str]] = {}
    for line in report.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        for cell, nxt in zip(cells, cells[1:], strict=False):
            if re.fullmatch(r"sha256:[0-9a-f]{12}", cell) and FIGURE.match(nxt):
                out.setdefault(cell, set()).add(nxt)
    return out


def _section(report: str, title: str) -> list[list[str]]:
    """The table rows (cells) of one section of a report."""
    part = report.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in part.splitlines() if ln.startswith("|")][2:]
    return [[c.strip() for c in r.strip("|").split("|")] for r in rows]


def test_a_second_run_starts_from_the_pooled_best_and_history_pools_every_source(tmp_path):
    bundle = tmp_path / "bundle"
    shutil.copytree(EXAMPLE / "host", bundle)
    (bundle / "budget.json").write_text(json.dumps(BUDGET))
    (bundle / "cases.json").write_text(json.dumps(CASES))
    store_path = tmp_path / "store.duckdb"
    first = optimize(bundle, store_path, tmp_path / "r1")
    second = optimize(bundle, store_path, tmp_path / "r2")

    store = Store(store_path)
    assert _starts_were_the_best_known(store, first["run_id"]) == []  # nothing known before it
    starts = _starts_were_the_best_known(store, second["run_id"])
    assert len(starts) <= 1  # re-adopted once, if at all

    done = CliRunner().invoke(
        main, ["history", "softmax_kernel", "--store", str(store_path), "--to", str(tmp_path / "h")]
    )
    assert done.exit_code == 0, done.output
    report = (tmp_path / "h" / "report.md").read_text()
    measured = queries.query(
        store,
        "SELECT DISTINCT source_hash FROM candidates WHERE outcome IN ('promoted', 'rejected') "
        "AND decided_speedup IS NOT NULL "
        "AND candidate_id <> 'baseline'",
    ).column("source_hash")
    sources = _section(report, "Sources, one pooled figure each")
    assert sorted(r[2] for r in sources) == sorted(h.as_py()[:19] for h in measured)
    figures = _figures(report)
    assert figures and all(len(shown) == 1 for shown in figures.values()), figures
    assert set(figures) == {r[2] for r in sources}
    if starts:  # the start was measured in both runs: one figure pools them all
        (start,) = starts
        (source,) = [
            r["source_hash"][:19]
            for r in queries.query(
                store,
                "SELECT source_hash FROM candidates WHERE run_id = $r AND candidate_id = $c",
                {"r": second["run_id"], "c": start},
            ).to_pylist()
        ]
        (shown,) = figures[source]
        assert int(shown.rsplit(", ", 1)[1].split()[0]) >= 2, shown
    for row in _section(report, "Runs"):  # a run's winner: its source's figure, not the run's
        winner_figure = row[8]
        assert winner_figure == "" or winner_figure in figures[row[7]], row
