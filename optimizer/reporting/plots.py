"""The reports' figures, drawn with matplotlib as SVG text (no display, no browser needed to
draw them; the HTML report inlines them, the Markdown report links the files).

Each function takes rows as the views give them (lists of dicts) and returns one SVG document.
Every figure has labelled axes with units and a legend; failed candidates are drawn (at the foot
of the axis, as a cross), never dropped; axes go logarithmic where the values span more than
`LOG_SPAN` times. A speedup is drawn with its confidence interval as an error bar wherever the
evidence has one. The baseline (1x) and the promotion threshold (min speedup) are two lines of
their own colour and style, each labelled with its value at the axis's right end. Tick labels
and legends are at least `SMALL_PT` points. SVGs are deterministic for the same rows (fixed hash
salt, no date).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import matplotlib

matplotlib.use("Agg")  # draw to files only; never look for a display

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from tlxstore.events import BASELINE_ID  # noqa: E402

Row = dict[str, Any]

LOG_SPAN = 8.0  # values spanning more than this factor get a logarithmic axis
OUTCOME_STYLE = {  # outcome -> (colour, marker, legend label)
    "promoted": ("#2a9d4b", "o", "promoted"),
    "rejected": ("#7f7f7f", "o", "rejected"),
    "failed": ("#c0392b", "x", "failed (no speedup: drawn at the foot)"),
    "duplicate": ("#5b6fd6", "s", "duplicate (its original's result, not measured again)"),
    None: ("#e0a000", "^", "undecided"),
}
SMALL_PT = 8.5  # the smallest text of a figure: tick labels, legends, bar labels
_RC: Any = {
    "svg.hashsalt": "tlxdb",
    "svg.fonttype": "none",
    "font.size": 10,
    "xtick.labelsize": SMALL_PT,
    "ytick.labelsize": SMALL_PT,
    "legend.fontsize": SMALL_PT,
}
BASELINE_STYLE: Any = {"color": "black", "lw": 1.0, "ls": ":"}
BOX_FILLS = {True: "#9ecae1", False: "#fdae6b"}  # is the baseline -> its boxes' fill
THRESHOLD_STYLE: Any = {"color": "#d62728", "lw": 1.2, "ls": "--"}


def _svg(fig: Figure) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None}, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def _spans(values: Sequence[float]) -> bool:
    pos = [v for v in values if v is not None and v > 0]
    return bool(pos) and max(pos) / min(pos) > LOG_SPAN


def _empty(title: str, why: str) -> str:
    with plt.rc_context(_RC):
        fig, ax = plt.subplots(figsize=(6.4, 1.2))
        ax.axis("off")
        ax.set_title(title)
        ax.text(0.5, 0.4, why, ha="center", va="center", transform=ax.transAxes)
        return _svg(fig)


def _reference_lines(ax: Any, min_speedup: float | None) -> None:
    """The baseline (1x) and the min-speedup threshold: two styles, two legend entries, each
    named with its value at the right end of the axis (above the line, the baseline's below, so
    the labels stay apart when the values are close; on a white ground, over bars too)."""
    ground = {
        "boxstyle": "square,pad=0.1",
        "facecolor": "white",
        "edgecolor": "none",
        "alpha": 0.85,
    }
    ax.axhline(1.0, label="baseline (1x)", zorder=4, **BASELINE_STYLE)
    ax.annotate("baseline 1x", (1.0, 1.0), xycoords=("axes fraction", "data"),
                xytext=(-3, -3), textcoords="offset points", ha="right", va="top",
                fontsize=SMALL_PT, bbox=ground, zorder=5)  # fmt: skip
    if min_speedup:
        ax.axhline(min_speedup, label=f"min speedup ({min_speedup:g}x)", zorder=4,
                   **THRESHOLD_STYLE)  # fmt: skip
        ax.annotate(f"min speedup {min_speedup:g}x", (1.0, min_speedup),
                    xycoords=("axes fraction", "data"), xytext=(-3, 3), textcoords="offset points",
                    ha="right", va="bottom", fontsize=SMALL_PT, color=THRESHOLD_STYLE["color"],
                    bbox=ground, zorder=5)  # fmt: skip


def _error(value: float | None, lo: float | None, hi: float | None) -> list[list[float]] | None:
    """matplotlib's yerr for one value and its interval, or None without one."""
    if value is None or lo is None or hi is None:
        return None
    return [[max(0.0, value - lo)], [max(0.0, hi - value)]]


def best_so_far(candidates: Sequence[Row], min_speedup: float | None = None) -> str:
    """Each candidate's decided speedup in proposal order with its confidence interval (error
    bars), coloured by outcome, and the best promoted so far as a step line. Failed and
    undecided candidates sit at the foot of the axis."""
    title = "Speedup per candidate and best so far"
    rows = [r for r in candidates if r["candidate_id"] != BASELINE_ID]
    if not rows:
        return _empty(title, "no candidates besides the baseline")
    measured = [r["decided_speedup"] for r in rows if r["decided_speedup"] is not None]
    bounds = [r[k] for r in rows for k in ("ci_low", "ci_high") if r.get(k)]
    values = [*measured, *bounds, 1.0, *([min_speedup] if min_speedup else [])]
    log = _spans(values)
    foot = min(values) / 1.25 if log else min(0.0, min(values))
    with plt.rc_context(_RC):
        fig, ax = plt.subplots(figsize=(7.2, 3.6))
        xs = list(range(1, len(rows) + 1))
        seen: set[Any] = set()
        for x, r in zip(xs, rows, strict=True):
            colour, marker, label = OUTCOME_STYLE.get(r["outcome"], OUTCOME_STYLE[None])
            y = r["decided_speedup"] if r["decided_speedup"] is not None else foot
            hollow = r["outcome"] == "duplicate"  # its original's result, drawn hollow
            err = _error(r["decided_speedup"], r.get("ci_low"), r.get("ci_high"))
            if err is not None:
                ax.errorbar([x], [y], yerr=err, fmt="none", ecolor=colour, elinewidth=1.0,
                            capsize=3, zorder=2)  # fmt: skip
            ax.scatter(
                [x],
                [y],
                marker=marker,
                s=28,
                zorder=3,
                label=None if r["outcome"] in seen else label,
                facecolors="none" if hollow else colour,
                edgecolors=None if marker == "x" else colour,
            )
            seen.add(r["outcome"])
        best, line = 1.0, []
        for r in rows:
            if r["outcome"] == "promoted" and r["decided_speedup"] is not None:
                best = max(best, r["decided_speedup"])
            line.append(best)
        ax.step([0, *xs], [1.0, *line], where="post", color="#2a9d4b", lw=1.5, label="best so far")
        _reference_lines(ax, min_speedup)
        if log:
            ax.set_yscale("log")
        ax.set_xlabel("candidate, in proposal order")
        ax.set_ylabel("decided speedup vs baseline (x), 99% CI" + (", log scale" if log else ""))
        ax.set_title(title)
        ax.set_xticks(xs, [r["candidate_id"] for r in rows], rotation=90 if len(xs) > 12 else 0)
        ax.legend(loc="best")
        ax.grid(alpha=0.3)
        return _svg(fig)


def case_speedups(
    rows: Sequence[Row],
    candidate_id: str,
    intervals: dict[tuple[str, str], tuple[float, float]] | None = None,
    min_speedup: float | None = None,
) -> str:
    """One candidate's speedup per case: bars per stage (its decision, its final revalidation),
    each with its confidence interval where `intervals` has one ((stage, case) -> (low, high))."""
    title = f"Per-case speedup of {candidate_id}"
    intervals = intervals or {}
    rows = [r for r in rows if r["candidate_id"] == candidate_id]
    if not rows:
        return _empty(title, "no per-case figures recorded for it")
    cases = sorted({r["case_id"] for r in rows})
    stages = [s for s in ("decision", "revalidation") if any(r["stage"] == s for r in rows)]
    width = 0.8 / len(stages)
    with plt.rc_context(_RC):
        fig, ax = plt.subplots(figsize=(max(4.8, 1.1 * len(cases) + 2), 3.4))
        for i, stage in enumerate(stages):
            last = {r["case_id"]: r for r in rows if r["stage"] == stage}
            ys = [last[c]["speedup"] if c in last else 0.0 for c in cases]
            xs = [j + (i - (len(stages) - 1) / 2) * width for j in range(len(cases))]
            bars = ax.bar(xs, ys, width, label=stage, color=("#4c78a8", "#f58518")[i])
            ax.bar_label(bars, fmt="%.3g", fontsize=SMALL_PT, padding=6)  # above the error bar
            for x, y, case in zip(xs, ys, cases, strict=True):
                ci = intervals.get((stage, case))
                err = _error(y, *ci) if ci else None
                if err is not None:
                    ax.errorbar([x], [y], yerr=err, fmt="none", ecolor="black", elinewidth=1.0,
                                capsize=4, zorder=3)  # fmt: skip
        _reference_lines(ax, min_speedup)
        ax.margins(y=0.12)  # room for the bar labels
        ax.set_xticks(range(len(cases)), cases, rotation=30 if len(cases) > 4 else 0)
        ax.set_xlabel("case")
        ax.set_ylabel("speedup vs baseline (x), 99% CI")
        ax.set_title(title)
        ax.legend()
        ax.grid(axis="y", alpha=0.3)
        return _svg(fig)


def sample_distributions(samples: Sequence[Row], candidate_ids: Sequence[str]) -> str:
    """Box plots of the raw samples (us) of the given candidates, one panel per case so cases of
    different sizes never share an axis; a panel goes logarithmic where its values span widely."""
    title = "Benchmark samples per case"
    cases = sorted({r["case_id"] for r in samples if r["candidate_id"] in candidate_ids})
    if not cases:
        return _empty(title, "no samples recorded")
    with plt.rc_context(_RC):
        fig, axes = plt.subplots(
            1, len(cases), figsize=(max(4.0, 3.0 * len(cases)), 3.6), squeeze=False,
            layout="constrained",
        )  # fmt: skip
        for ax, case in zip(axes[0], cases, strict=True):
            data, labels, fills = [], [], []
            for cid in candidate_ids:
                for phase in ("validation", "round", "revalidation"):
                    vals = [
                        r["sample_us"]
                        for r in samples
                        if r["candidate_id"] == cid and r["case_id"] == case and r["phase"] == phase
                    ]
                    if vals:
                        data.append(vals)
                        labels.append(f"{cid}\n{phase}")
                        fills.append(BOX_FILLS[cid == BASELINE_ID])
            boxes = ax.boxplot(data, tick_labels=labels, showfliers=True, patch_artist=True)
            for box, fill in zip(boxes["boxes"], fills, strict=True):
                box.set_facecolor(fill)
            if _spans([v for d in data for v in d]):
                ax.set_yscale("log")
            ax.set_title(case)
            if ax is axes[0][0]:
                ax.set_ylabel("time per call (us)")
            ax.tick_params(axis="x", rotation=45)
            ax.grid(axis="y", alpha=0.3)
        fig.suptitle(title)
        return _svg(fig)


def best_known(medians_us: Sequence[float | None]) -> list[float | None]:
    """The running minimum of runs' best medians, in run order: the best known time after each
    run. A run that measured nothing new (no winner: its best is its baseline) keeps the best
    known before it, rather than falling back to its baseline."""
    out: list[float | None] = []
    best: float | None = None
    for v in medians_us:
        if v is not None and (best is None or v < best):
            best = v
        out.append(best)
    return out


def trends(rows: Sequence[Row]) -> str:
    """Baseline and best median per case over time, one panel per device (a GPU and the CPU
    interpreter differ by orders of magnitude); dashed: each run's baseline, solid: the best
    known so far (`best_known`)."""
    title = "Baseline and best per case over time"
    devices = sorted({r["device_kind"] for r in rows})
    if not devices:
        return _empty(title, "no run with a measured baseline")
    with plt.rc_context(_RC):
        fig, axes = plt.subplots(len(devices), 1, figsize=(7.2, 2.8 * len(devices)), squeeze=False)
        for ax, device in zip(axes[:, 0], devices, strict=True):
            mine = sorted(
                (r for r in rows if r["device_kind"] == device), key=lambda r: r["started_at"]
            )
            cases = sorted({r["case_id"] for r in mine})
            for i, case in enumerate(cases):
                pts = [r for r in mine if r["case_id"] == case]
                xs: list[datetime] = [r["started_at"] for r in pts]
                colour = f"C{i % 10}"
                ax.plot(xs, [r["baseline_median_us"] for r in pts], ls="--", marker="o",
                        color=colour, label=f"{case} baseline",
                        gid=f"baseline {device} {case}")  # fmt: skip
                ax.plot(xs, best_known([r["best_median_us"] for r in pts]), ls="-", marker="s",
                        color=colour, label=f"{case} best so far",
                        gid=f"best-so-far {device} {case}")  # fmt: skip
            values = [v for r in mine for v in (r["baseline_median_us"], r["best_median_us"]) if v]
            if _spans(values):
                ax.set_yscale("log")
            ax.set_title(device)
            ax.set_xlabel("run start (UTC)")
            ax.set_ylabel("median time per call (us)")
            ax.legend(ncol=2)
            ax.grid(alpha=0.3)
            fig.autofmt_xdate()
        fig.suptitle(title)
        return _svg(fig)


def roofline(points: Sequence[Row], device_kind: str) -> str | None:
    """Achieved TFLOP/s against arithmetic intensity (flop/byte) of each measured case, under the
    device's bandwidth and compute ceilings (profilers/hardware.py). None when no point has both
    bytes and flops, or the device's ceilings are unknown."""
    from profilers.hardware import Resource, lookup_device

    pts = [p for p in points if p.get("flops") and p.get("bytes_moved") and p.get("median_us")]
    spec = lookup_device(device_kind)  # an unknown device has no ceilings
    bw, fl = spec.ceiling(Resource.DRAM_BANDWIDTH), spec.ceiling(Resource.BF16_DENSE)
    if not pts or bw is None or fl is None:
        return None
    with plt.rc_context(_RC):
        fig, ax = plt.subplots(figsize=(6.4, 4.0))
        ai = [p["flops"] / p["bytes_moved"] for p in pts]
        lo, hi = min(ai) / 10, max(ai) * 10
        xs = [lo * (hi / lo) ** (i / 100) for i in range(101)]
        ax.plot(xs, [min(fl.value, bw.value * x) / 1e12 for x in xs], color="black",
                label=f"ceilings: {bw.value / 1e12:.2f} TB/s, {fl.value / 1e12:.0f} TFLOP/s (BF16)")  # fmt: skip
        for status in ("baseline", "candidate"):
            sel = [
                (a, p)
                for a, p in zip(ai, pts, strict=True)
                if (p["candidate_id"] == BASELINE_ID) == (status == "baseline")
            ]
            if sel:
                ax.scatter(
                    [a for a, _ in sel],
                    [p["flops"] / (p["median_us"] * 1e6) for _, p in sel],
                    marker="o" if status == "candidate" else "D",
                    label=f"{status} cases",
                    zorder=3,
                )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("arithmetic intensity (flop/byte)")
        ax.set_ylabel("achieved TFLOP/s")
        ax.set_title(f"Roofline on {device_kind}")
        ax.legend()
        ax.grid(alpha=0.3, which="both")
        return _svg(fig)
