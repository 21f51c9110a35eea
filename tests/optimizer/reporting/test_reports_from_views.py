"""`tlxdb report RUN` and `tlxdb history KERNEL` read the views (queries/reports/*.sql) of the
history test store and write Markdown and HTML with matplotlib figures; the HTML is rendered in a
real headless Chromium and its screenshot checked for size and drawn (non-blank) pixels."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from support import history_store as h
from support.browser import HEIGHT, WIDTH, drawn, screenshot

from cli.main import main


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    return h.build(tmp_path_factory.mktemp("history") / "store.duckdb")


def cli(*args: str):
    return CliRunner().invoke(main, list(args))


def test_history_writes_markdown_and_html_with_figures_that_render(store, tmp_path):
    out = cli("history", "softmax_kernel", "--store", str(store), "--to", str(tmp_path / "h"))
    assert out.exit_code == 0, out.output
    md, page, svg = (tmp_path / "h" / n for n in ("report.md", "report.html", "trends.svg"))
    assert out.stdout.split() == [str(md), str(page), str(svg)]
    text = md.read_text()
    assert "![trends.svg](trends.svg)" in text
    for run in (h.H200_SOFTMAX, *h.CPU_SOFTMAX):
        assert f"| {run} |" in text
    assert h.H200_RMSNORM not in text  # another kernel
    html = page.read_text()
    assert html.count("<svg") == 1
    for label in ("NVIDIA H200", "cpu-interpreter", "median time per call (us)", "run start (UTC)"):
        assert label in html  # a panel per device, axes with units
    assert "2x4096 baseline" in html and "2x4096 best" in html  # the legend

    png = tmp_path / "history.png"
    screenshot(page, png)
    size, ink, colours = drawn(png)
    assert size == (WIDTH, HEIGHT)
    assert ink > 0.05 and colours > 50, (ink, colours)


def test_history_gives_a_source_one_pooled_figure_wherever_it_names_it(store, tmp_path):
    """The CPU softmax runs both promoted and revalidated BLOCK=512 (e4fc8ff14b3d): its four
    measurements are one figure with its CI, in every table; no run's own figure is shown. (The
    H200 run measured the same source: another device, another figure.)"""
    out = cli("history", "softmax_kernel", "--store", str(store), "--to", str(tmp_path / "h"))
    assert out.exit_code == 0, out.output
    text = (tmp_path / "h" / "report.md").read_text()
    shown: dict[tuple[str, str], set[str]] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        device = next((c for c in cells if c in ("cpu-interpreter", "NVIDIA H200")), "")
        for cell, nxt in zip(cells, cells[1:], strict=False):
            if re.fullmatch(r"sha256:[0-9a-f]{12}", cell) and re.search(r"measurements?$", nxt):
                shown.setdefault((device, cell), set()).add(nxt)
    assert shown["cpu-interpreter", "sha256:e4fc8ff14b3d"] == {
        "3.229x [2.848, 3.662], 4 measurements"
    }
    assert shown["NVIDIA H200", "sha256:e4fc8ff14b3d"] == {"1.073x [1.069, 1.077], 1 measurement"}
    assert all(len(figures) == 1 for figures in shown.values()), shown
    sources = text.split("## Sources, one pooled figure each\n", 1)[1].split("\n## ", 1)[0]
    assert sources.count("| sha256:e4fc8ff14b3d |") == 2  # one per device
    assert "2.914x" not in text and "2.808x" not in text  # the runs' own revalidated figures


def test_run_report_draws_every_candidate_failed_ones_included(store, tmp_path):
    out = cli("report", h.H200_MATMUL[:16], "--store", str(store), "--to", str(tmp_path / "r"))
    assert out.exit_code == 0, out.output
    names = {Path(p).name for p in out.stdout.split()}
    assert names == {
        "report.md",
        "report.html",
        "best_so_far.svg",
        "case_speedups.svg",
        "samples.svg",
        "roofline.svg",
    }
    best = (tmp_path / "r" / "best_so_far.svg").read_text()
    assert "failed (no speedup: drawn at the foot)" in best and "best so far" in best
    assert "decided speedup vs baseline (x)" in best and "candidate, in proposal order" in best
    md = (tmp_path / "r" / "report.md").read_text()
    assert "status: finished: search_exhausted" in md and "revalidated 2.006x [1.968, 2.022]" in md
    assert md.count("| failed |") == 2  # the two candidates that did not build are listed
    roof = (tmp_path / "r" / "roofline.svg").read_text()
    assert "arithmetic intensity (flop/byte)" in roof and "achieved TFLOP/s" in roof

    png = tmp_path / "run.png"
    screenshot(tmp_path / "r" / "report.html", png)
    size, ink, colours = drawn(png)
    assert size == (WIDTH, HEIGHT) and ink > 0.05 and colours > 50, (ink, colours)


def _path_points(svg: str, gid: str) -> list[tuple[float, float]]:
    """The (x, y) points of the line matplotlib drew with this gid."""
    d = re.search(rf'<g id="{re.escape(gid)}">\s*<path d="([^"]*)"', svg)
    assert d is not None, gid
    return [(float(x), float(y)) for x, y in re.findall(r"[ML] ([\d.]+) ([\d.]+)", d.group(1))]


def test_the_best_line_keeps_the_best_known_time_after_runs_that_found_nothing(store, tmp_path):
    # RMSNorm on the CPU: the first run found c001 (56.7 ms on 4x3000); the two after it found no
    # winner, so their own best is their baseline (162 ms, 170 ms)
    out = cli("history", "rmsnorm_kernel", "--store", str(store), "--to", str(tmp_path / "h"))
    assert out.exit_code == 0, out.output
    svg = (tmp_path / "h" / "trends.svg").read_text()
    for case in ("4x3000", "4x4096"):
        points = _path_points(svg, f"best-so-far cpu-interpreter {case}")
        assert len(points) == 3 and len({y for _, y in points}) == 1, points
        baseline = _path_points(svg, f"baseline cpu-interpreter {case}")
        assert len({y for _, y in baseline}) == 3  # the baselines do differ from run to run
    assert "4x3000 best so far" in svg


def test_history_takes_a_bundle_digest_prefix_with_or_without_its_algorithm(store, tmp_path):
    md = {}
    for name, prefix in (("tagged", "sha256:961bc9295b9e"), ("bare", "961bc9295b9e")):
        out = cli("history", prefix, "--store", str(store), "--to", str(tmp_path / name))
        assert out.exit_code == 0, out.output
        md[name] = (tmp_path / name / "report.md").read_text()
    assert md["bare"] == md["tagged"].replace("sha256:961bc9295b9e", "961bc9295b9e", 1)
    for run in (*h.CPU_RMSNORM_AGENT, h.CPU_RMSNORM_TUNE):  # the three runs of that bundle
        assert f"| {run} |" in md["bare"]


def test_speedups_are_drawn_with_their_intervals_and_the_threshold_apart(store, tmp_path):
    out = cli("report", h.H200_SOFTMAX, "--store", str(store), "--to", str(tmp_path / "r"))
    assert out.exit_code == 0, out.output
    best = (tmp_path / "r" / "best_so_far.svg").read_text()
    cases = (tmp_path / "r" / "case_speedups.svg").read_text()
    for svg in (best, cases):
        assert "99% CI" in svg and "baseline 1x" in svg and "min speedup 1.01x" in svg
        assert svg.count("stroke-dasharray") >= 2  # the baseline's dots, the threshold's dashes
    assert best.count('id="LineCollection_') >= 3  # an error bar per measured candidate
    assert cases.count('id="LineCollection_') == 4  # two cases, decision and revalidation
    sizes = [float(v) for v in re.findall(r"font-size: ([\d.]+)px", best + cases)]
    assert sizes and min(sizes) >= 8.5, sorted(set(sizes))


def test_a_cut_off_run_is_reported_unfinished_not_running(store, tmp_path):
    out = cli("report", h.H200_MATMUL_CUT_OFF, "--store", str(store), "--to", str(tmp_path / "c"))
    assert out.exit_code == 0, out.output
    md = (tmp_path / "c" / "report.md").read_text()
    assert "status: unfinished: the store holds no RunFinished event" in md
    assert "still running;" not in md and "last event at 2026-11-30 14:00:55" in md


def test_duplicates_are_drawn_as_duplicates(store, tmp_path):
    out = cli("report", h.CPU_RMSNORM_AGENT[1], "--store", str(store), "--to", str(tmp_path / "d"))
    assert out.exit_code == 0, out.output
    assert "duplicate (its original's result" in (tmp_path / "d" / "best_so_far.svg").read_text()
    md = (tmp_path / "d" / "report.md").read_text()
    assert f"| c001 | raw | {h.CPU_RMSNORM_AGENT[0]}/c001 | promoted |" in md
    assert "timings measure the Triton interpreter on the CPU, not a GPU" in md


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["history", "no_such_kernel"], "no run of kernel or bundle 'no_such_kernel'"),
        (["report", "r1999"], "no run 'r1999'"),
        (["history", "softmax"], "no run of kernel or bundle 'softmax'"),
    ],
)
def test_unknown_kernels_and_runs_are_one_line_errors(store, tmp_path, args, message):
    out = cli(*args, "--store", str(store), "--to", str(tmp_path / "x"))
    assert (
        out.exit_code == 1 and message in out.stderr and len(out.stderr.strip().splitlines()) == 1
    )
    assert not (tmp_path / "x").exists()


def test_a_history_of_a_name_with_no_run_suggests_the_kernels_of_the_store(store, tmp_path):
    """A user asks for the name they know (the entry they gave `bundle new`, a kernel without its
    underscore or suffix): the one-line error names the store's kernels that come close."""
    out = cli("history", "softmax", "--store", str(store), "--to", str(tmp_path / "x"))
    assert out.exit_code == 1
    assert "did you mean softmax_kernel? see `tlxdb query" in out.stderr, out.stderr
    # a short launcher name that difflib alone finds too far from the kernel's
    out = cli("history", "SOFT", "--store", str(store), "--to", str(tmp_path / "x"))
    assert out.exit_code == 1
    assert "did you mean softmax_kernel? see `tlxdb query" in out.stderr, out.stderr
    far = cli("history", "qqqq", "--store", str(store), "--to", str(tmp_path / "y"))
    assert far.exit_code == 1 and "did you mean" not in far.stderr


def test_times_in_a_report_are_plain_numbers_never_in_exponent_form(store, tmp_path):
    # a CPU run's medians are 1e4-1e5 us: its report's tables read "2.51e+05 | 7.733e+04" beside
    # "3.246"; the tripwire's reason is the event's own text, written when the run was made
    out = cli("report", h.CPU_SOFTMAX[0], "--store", str(store), "--to", str(tmp_path / "r"))
    assert out.exit_code == 0, out.output
    text = (tmp_path / "r" / "report.md").read_text()
    assert "| decision | 2x3000 | 1 | 251047 | 77334 | 3.246 | 0.3888 |" in text
    ours = [ln for ln in text.splitlines() if "tripwire" not in ln]
    assert not [ln for ln in ours if re.search(r"\d\.\d+e\+\d+", ln)]
