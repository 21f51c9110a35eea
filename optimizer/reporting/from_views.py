"""Reports that are queries: `tlxdb report RUN` (one run) and `tlxdb history KERNEL` (every run
of a kernel or bundle), built from the store's views through queries/reports/*.sql, never from
the Python fold. A run writes its report.md with write_run_report too, into its output folder
once its events are in the store: one report, one writer.

Each report is written as report.md (tables, and links to the figures) and report.html (the same
tables with the figures inline), with the figures as SVG files beside them (plots.py).
"""

from __future__ import annotations

import difflib
import html
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import queries
from optimizer.atomic import write_atomic
from optimizer.decision import stats
from optimizer.reporting import plots
from optimizer.reporting.live import cpu_list
from optimizer.units import number
from tlxstore.errors import TlxdbError, UnknownRunError
from tlxstore.events import BASELINE_ID, RunEnvironment
from tlxstore.hashing import tagged_prefix
from tlxstore.limits import regular_file_inside
from tlxstore.runlog import LOG_NAME, RunLog
from tlxstore.store import Store

Row = dict[str, Any]

RUN_QUERIES = (
    "run_summary",
    "run_settings",
    "run_candidates",
    "run_case_speedups",
    "run_samples",
    "run_revalidations",
    "run_integrity_flags",
    "run_duplicates",
    "run_throughput",
    "run_commits",
    "run_validation",
    "run_machine_states",
    "run_notes",
)
HISTORY_QUERIES = (
    "history_kernels",
    "history_sources",
    "history_runs",
    "history_trends",
    "history_exclusions",
)


def _text(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return number(v)
    if isinstance(v, datetime):
        return v.strftime("%Y-%m-%d %H:%M:%S")
    return " ".join(str(v).split())


def _short(digest: str | None) -> str:
    """A tagged hash cut to 12 hex digits (enough to find it with starts_with)."""
    return "" if digest is None else digest[: digest.find(":") + 13]


def _ci(speedup: float | None, lo: float | None, hi: float | None) -> str:
    if speedup is None:
        return ""
    return f"{speedup:.4g}x" + (
        f" [{lo:.4g}, {hi:.4g}]" if lo is not None and hi is not None else ""
    )


class Section:
    """One heading with lines, a table and figures, rendered to Markdown and to HTML."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.lines: list[str] = []
        self.header: list[str] = []
        self.rows: list[list[str]] = []
        self.figures: list[tuple[str, str]] = []  # (file name, svg)

    def table(self, header: list[str], rows: Sequence[Sequence[Any]]) -> Section:
        self.header, self.rows = header, [[_text(c) for c in r] for r in rows]
        return self

    def markdown(self) -> str:
        out = [f"## {self.title}", ""]
        out += [f"- {line}" for line in self.lines]
        if self.lines:
            out.append("")
        if self.header:
            if self.rows:
                out.append("| " + " | ".join(self.header) + " |")
                out.append("|" + "---|" * len(self.header))
                out += [
                    "| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in self.rows
                ]
            else:
                out.append("(none)")
            out.append("")
        out += [f"![{name}]({name})" for name, _ in self.figures]
        return "\n".join(out).rstrip() + "\n"

    def html(self) -> str:
        e = html.escape
        out = [f"<h2>{e(self.title)}</h2>"]
        if self.lines:
            out.append("<ul>" + "".join(f"<li>{e(line)}</li>" for line in self.lines) + "</ul>")
        if self.header:
            if self.rows:
                out.append(
                    "<table><tr>"
                    + "".join(f"<th>{e(h)}</th>" for h in self.header)
                    + "</tr>"
                    + "".join(
                        "<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>" for r in self.rows
                    )
                    + "</table>"
                )
            else:
                out.append("<p>(none)</p>")
        out += [
            f'<figure id="{e(name)}">{svg[svg.index("<svg") :]}</figure>'
            for name, svg in self.figures
        ]
        return "\n".join(out)


_CSS = (
    "body{font-family:sans-serif;margin:2em;max-width:80em;color:#222}"
    "table{border-collapse:collapse;font-size:12px;margin:0.5em 0}"
    "td,th{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}"
    "th{background:#f0f0f0}figure{margin:1em 0}svg{max-width:100%;height:auto}"
)


def _write(title: str, sections: list[Section], to_dir: Path) -> list[Path]:
    to_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for s in sections:
        for name, svg in s.figures:
            write_atomic(to_dir / name, svg)
            written.append(to_dir / name)
    md = f"# {title}\n\n" + "\n".join(s.markdown() for s in sections)
    page = (
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{_CSS}</style></head><body><h1>{html.escape(title)}</h1>\n"
        + "\n".join(s.html() for s in sections)
        + "\n</body></html>\n"
    )
    write_atomic(to_dir / "report.md", md)
    write_atomic(to_dir / "report.html", page)
    return [to_dir / "report.md", to_dir / "report.html", *written]


def _status(run: Row) -> str:
    if run["status"] == "finished":
        return f"finished: {run['stopping_reason']}" + (
            f" ({run['detail']})" if run["detail"] else ""
        )
    return (
        "unfinished: the store holds no RunFinished event (the run was cut off, or is still "
        f"running); last event at {_text(run['last_event_at'])}"
    )


def _validation(checks: list[Row]) -> Section:
    """The bundle's checks (docs/VALIDATION.md), warnings counted in the title."""
    warned = sum(1 for r in checks if r["warning"])
    return Section(f"Validation ({warned} warning(s))").table(
        ["check", "outcome", "detail"],
        [[r["check_name"], r["outcome"], r["detail"]] for r in checks],
    )


def run_sections(data: dict[str, list[Row]]) -> list[Section]:
    """The sections of one run's report, from its views."""
    [run] = data["run_summary"]
    settings = data["run_settings"][0] if data["run_settings"] else None
    cands = data["run_candidates"]
    shown = _shown(run, cands)
    return [
        _run_head(run, settings),
        _validation(data["run_validation"]),
        _candidates(cands, settings),
        *_winner_sections(data, shown, settings["min_speedup"] if settings else None),
        *_evidence_sections(data),
        *_machine_sections(data, run),
        *_optional_sections(data, run),
    ]


def _value(v: Any) -> str:
    if isinstance(v, list):
        return cpu_list(v) if all(isinstance(x, int) for x in v) else ", ".join(map(str, v))
    return _text(v)


def environment_differences(envs: list[Row], group_of: dict[str, str]) -> list[str]:
    """One warning per field of RunEnvironment.COMPARED in which runs of one group (a device
    kind) differ, naming each value and its runs; each run's first environment (its start)
    counts, and a value that could not be read (null) is no difference."""
    first: dict[str, Row] = {}
    for e in envs:
        first.setdefault(e["run_id"], e)
    groups: dict[str, list[Row]] = {}
    for run_id, e in first.items():
        groups.setdefault(group_of.get(run_id, ""), []).append(e)
    out = []
    for group, rows in groups.items():
        for field in RunEnvironment.COMPARED:
            seen: dict[str, list[str]] = {}
            for r in rows:
                if r[field] is not None:
                    seen.setdefault(_value(r[field]), []).append(r["run_id"])
            if len(seen) > 1:
                values = "; ".join(f"{v} ({', '.join(runs)})" for v, runs in seen.items())
                on = f" on {group}" if group else ""
                out.append(f"WARNING: runs compared here{on} differ in {field}: {values}")
    return out


def _environment_section(envs: list[Row], group_of: dict[str, str]) -> Section:
    """Each run's environment, and a warning where runs compared side by side differ in it."""
    section = Section("Environment").table(
        ["run", "driver", "persistence", "app clocks SM/mem (MHz)", "power limit (W)", "GPU NUMA node", "CPUs", "CPU governor", "NVML"],
        [[e["run_id"], e["driver_version"], e["persistence_mode"], f"{_text(e['application_sm_clock_mhz'])}/{_text(e['application_mem_clock_mhz'])}", e["power_limit_w"], e["gpu_numa_node"], _value(e["cpu_affinity"]) if e["cpu_affinity"] else "", e["cpu_governor"], e["unavailable"] or e["source"]] for e in envs],
    )  # fmt: skip
    section.lines = environment_differences(envs, group_of)
    return section


def _machine_sections(data: dict[str, list[Row]], run: Row) -> list[Section]:
    """The run's environment beside its prior runs', the calls left out because the GPU
    throttled or was shared, and what qualified each decision (host-bound cases among it)."""
    envs = data.get("environments", [])
    env = _environment_section(envs, {e["run_id"]: run["device_kind"] or "" for e in envs})
    marked = Section("Benchmark calls left out (the GPU throttled or was shared)").table(
        ["candidate", "case", "phase", "window", "block", "reasons", "neighbours", "SM clock min (MHz)"],
        [[r["candidate_id"], r["case_id"], r["phase"], r["window_id"], r["block"], r["reasons"], r["neighbours"], r["sm_clock_min_mhz"]] for r in data["run_machine_states"]],
    )  # fmt: skip
    notes = Section("Decision notes").table(
        ["candidate", "outcome", "note"],
        [[r["candidate_id"], r["outcome"], n] for r in data["run_notes"] for n in r["notes"]],
    )
    return [env, marked, notes]


def _run_head(run: Row, settings: Row | None) -> Section:
    """What ran where, with which tools and budget, and how it ended."""
    head = Section("Run")
    head.lines = [
        f"kernel: {run['kernel_id']} ({run['kernel_path']})",
        f"bundle: {run['bundle_digest']}",
        f"device: {run['device_kind']} ({run['architecture'] or 'unknown architecture'}) on {run['host']}"
        + (
            " (timings measure the Triton interpreter on the CPU, not a GPU)"
            if run["backend"] == "cpu"
            else ""
        ),
        f"tools: triton {run['triton_version']}, torch {run['torch_version']}, tlxdb {run['tlxdb_version']}",
        f"provider: {run['provider']}" + (f" / {run['model']}" if run["model"] else ""),
        f"status: {_status(run)}",
        "winner: "
        + (
            f"{run['winner_id']} (source {run['winner_source_hash']}), decided speedup "
            f"{_ci(run['winner_decided_speedup'], None, None)}, revalidated "
            f"{_ci(run['revalidated_speedup'], run['revalidated_ci_low'], run['revalidated_ci_high'])}"
            if run["winner_id"]
            else "none"
        ),
        f"candidates: {run['candidates']}, events: {run['events']}",
        f"model exchanges: {run['exchanges'] or 0}, tokens in/out: {_text(run['tokens_in']) or 'unknown'}"
        f"/{_text(run['tokens_out']) or 'unknown'}, cost: "
        + (f"{run['cost_usd']:.4f} USD" if run["cost_usd"] is not None else "unknown"),
    ]
    if settings:
        head.lines.append(
            f"budget: {settings['max_rounds']} rounds x {settings['candidates_per_round']} candidates, "
            f"min speedup {settings['min_speedup']}, max CV {settings['max_cv']}, "
            f"{settings['benchmark_repetitions']} repetitions"
        )
        head.lines.append(
            "prior runs: "
            + (", ".join(settings["prior_runs"] or []) or "none")
            + (f"; resumed from {settings['resumed_from']}" if settings["resumed_from"] else "")
        )
    return head


def _candidates(cands: list[Row], settings: Row | None) -> Section:
    """Every candidate with its decision, and the best-so-far figure."""
    best = Section("Candidates").table(
        ["candidate", "round", "parent", "kind", "hypothesis", "change", "outcome", "decided speedup [99% CI]", "reason", "tokens in/out"],
        [
            [
                c["candidate_id"], c["round"], c["parent_id"], c["hypothesis_kind"], c["hypothesis"],
                c["change"], c["outcome"] or "undecided", _ci(c["decided_speedup"], c["ci_low"], c["ci_high"]),
                _with_notes(c["reason"], c["notes"]), f"{_text(c['tokens_in'])}/{_text(c['tokens_out'])}" if c["tokens_in"] is not None else "",
            ]
            for c in cands
        ],
    )  # fmt: skip
    min_speedup = settings["min_speedup"] if settings else None
    best.figures.append(("best_so_far.svg", plots.best_so_far(cands, min_speedup)))
    return best


def _with_notes(reason: str | None, notes: list[str] | None) -> str:
    """A decision's reason followed by the notes that qualified it (a noisy case)."""
    return "; ".join([reason or "", *(f"note: {n}" for n in notes or [])]).strip("; ")


def _shown(run: Row, cands: list[Row]) -> list[str]:
    """The candidate the per-case sections show: the winner, else the best promoted one."""
    shown = [run["winner_id"]] if run["winner_id"] else []
    if not shown:
        promoted = [
            c for c in cands if c["outcome"] == "promoted" and c["candidate_id"] != BASELINE_ID
        ]
        shown = (
            [max(promoted, key=lambda c: c["decided_speedup"])["candidate_id"]] if promoted else []
        )
    return shown


def case_intervals(
    speedups: list[Row], samples: list[Row], candidate_id: str
) -> dict[tuple[str, str], tuple[float, float]]:
    """(stage, case) -> the 99% bootstrap interval of one case's speedup (optimizer.decision.stats),
    from the raw samples the stage compared: the baseline's and the candidate's before the final
    revalidation (the decision), or both sides' revalidation samples. A case whose samples do not
    give back the recorded speedup (its decision compared other samples: rescaled blocks, several
    devices) gets no interval rather than a wrong one."""
    side: dict[tuple[str, str, bool], list[float]] = {}
    for r in samples:
        key = (r["candidate_id"], r["case_id"], r["phase"] == "revalidation")
        side.setdefault(key, []).append(r["sample_us"])
    out = {}
    for r in speedups:
        if r["candidate_id"] != candidate_id or r["speedup"] is None:
            continue
        reval = r["stage"] == "revalidation"
        base = side.get((BASELINE_ID, r["case_id"], reval))
        cand = side.get((candidate_id, r["case_id"], reval))
        if not base or not cand:
            continue
        case = r["case_id"]
        if not math.isclose(stats.speedup({case: base}, {case: cand}, {case: 1.0}), r["speedup"]):
            continue
        out[(r["stage"], case)] = stats.speedup_interval({case: base}, {case: cand}, {case: 1.0})
    return out


def _winner_sections(
    data: dict[str, list[Row]], shown: list[str], min_speedup: float | None
) -> list[Section]:
    """Per-case speedups and sample distributions of the shown candidate against the baseline."""
    cases = Section("Per-case speedups" + (f" of {shown[0]}" if shown else "")).table(
        ["stage", "case", "weight", "baseline median (us)", "candidate median (us)", "speedup", "candidate CV"],
        [
            [r["stage"], r["case_id"], r["weight"], r["baseline_median_us"], r["candidate_median_us"], r["speedup"], r["candidate_cv"]]
            for r in data["run_case_speedups"] if shown and r["candidate_id"] == shown[0]
        ],
    )  # fmt: skip
    if shown:
        speedups = data["run_case_speedups"]
        intervals = case_intervals(speedups, data["run_samples"], shown[0])
        cases.figures.append(
            ("case_speedups.svg", plots.case_speedups(speedups, shown[0], intervals, min_speedup))
        )
    samples = Section("Sample distributions")
    samples.lines = [
        "the baseline" + (f" and {shown[0]}" if shown else "") + ", raw samples per case and phase"
    ]
    samples.figures.append(
        ("samples.svg", plots.sample_distributions(data["run_samples"], [BASELINE_ID, *shown]))
    )
    return [cases, samples]


def _evidence_sections(data: dict[str, list[Row]]) -> list[Section]:
    """Final revalidation, integrity flags and duplicates."""
    reval = Section("Final revalidation (the winner chain, in order)").table(
        ["candidate", "survived", "revalidated speedup [99% CI]", "alternations", "reason"],
        [[r["candidate_id"], r["survived"], _ci(r["revalidated_speedup"], r["ci_low"], r["ci_high"]), r["alternations"], _with_notes(r["reason"], r["notes"])] for r in data["run_revalidations"]],
    )  # fmt: skip
    flags = Section("Integrity flags").table(
        ["candidate", "guard", "blocking", "detail"],
        [[r["candidate_id"], r["guard"], r["blocking"], r["detail"]] for r in data["run_integrity_flags"]],
    )  # fmt: skip
    dups = Section("Duplicates").table(
        ["candidate", "match", "duplicate of", "its outcome", "its decided speedup"],
        [[r["candidate_id"], r["match"], f"{r['duplicate_of_run']}/{r['duplicate_of_candidate']}", r["original_outcome"], r["original_decided_speedup"]] for r in data["run_duplicates"]],
    )  # fmt: skip
    return [reval, flags, dups]


def _optional_sections(data: dict[str, list[Row]], run: Row) -> list[Section]:
    """The roofline (when the harness declared bytes or flops) and the commits (when any)."""
    out: list[Section] = []
    roof = plots.roofline(data["run_throughput"], run["device_kind"] or "")
    if roof is not None:
        r = Section("Roofline")
        r.lines = [
            "each case's achieved rate from the harness's declared bytes and flops and its median time"
        ]
        r.figures.append(("roofline.svg", roof))
        out.append(r)
    if data["run_commits"]:
        out.append(Section("Commits").table(
            ["candidate", "vcs", "success", "conflict", "revision", "subject"],
            [[r["candidate_id"], r["vcs"], r["success"], r["conflict"], r["rev_after"], r["subject"]] for r in data["run_commits"]],
        ))  # fmt: skip
    return out


def report_folder(store: Store, run_id: str) -> Path:
    """Where a run's report goes when no folder is named: the run's output folder if it is this
    run's own (it holds this run's log), else the current folder. The output_dir an import
    recorded (a TLX folder's result.json, another machine's path) is what the evidence says,
    never a place tlxdb writes to on its word."""
    rows = queries.query(store, "SELECT output_dir FROM runs WHERE run_id = $r", {"r": run_id})
    out = Path(rows.column("output_dir")[0].as_py() or ".") if rows.num_rows else Path(".")
    try:  # a log that is a FIFO or a symlink is not read (regular_file_inside)
        log = regular_file_inside(out, LOG_NAME) if out.is_dir() else None
        own = log is not None and RunLog.open(log).run_id == run_id
    except (TlxdbError, OSError):
        own = False
    return out if own else Path.cwd()


@dataclass(frozen=True)
class Written:
    """A report as written: its files, and the warnings it holds (for the command to repeat)."""

    paths: list[Path]
    warnings: list[str]


def _warnings(sections: list[Section]) -> list[str]:
    return [line for s in sections for line in s.lines if line.startswith("WARNING:")]


def write_run_report(store: Store, run_id: str, to_dir: Path) -> Written:
    """report.md, report.html and their figures for one run, from the views."""
    data = queries.report(store, RUN_QUERIES, {"run_id": run_id})
    if not data["run_summary"]:
        raise UnknownRunError(f"no run {run_id!r} in store {store.location}")
    if data["run_summary"][0]["started_at"] is None:
        raise UnknownRunError(f"run {run_id} has no start record; nothing to report")
    priors = (data["run_settings"][0]["prior_runs"] or []) if data["run_settings"] else []
    data |= queries.report(store, ("environments",), {"run_ids": [run_id, *priors]})
    sections = run_sections(data)
    return Written(_write(f"tlxdb run {run_id}", sections, to_dir), _warnings(sections))


def _pooled(speedup: float | None, lo: float | None, hi: float | None, n: int | None) -> str:
    """A source's one pooled figure: speedup [99% CI] and how many measurements it pools."""
    if speedup is None:
        return ""
    return f"{_ci(speedup, lo, hi)}, {n} measurement{'' if n == 1 else 's'}"


def history_sections(kernel: str, data: dict[str, list[Row]]) -> list[Section]:
    """Every figure of a source is its one pooled estimate (source_estimates), never one run's."""
    kh = Section("Best ever per kernel, bundle and device").table(
        ["kernel", "device", "bundle", "runs", "finished", "best source", "its pooled speedup [99% CI]", "first measured in", "last run"],
        [[r["kernel_id"], r["device_kind"], _short(r["bundle_digest"]), r["runs"], r["finished_runs"], _short(r["best_source_hash"]), _pooled(r["best_pooled_speedup"], r["best_ci_low"], r["best_ci_high"], r["best_measurements"]), f"{r['best_first_run_id']}/{r['best_first_candidate_id']}" if r["best_source_hash"] else "", r["last_run_at"]] for r in data["history_kernels"]],
    )  # fmt: skip
    sources = Section("Sources, one pooled figure each").table(
        ["device", "bundle", "source", "pooled speedup [99% CI]", "runs", "without CI, set aside", "first measured in", "Triton / torch"],
        [[r["device_kind"], _short(r["bundle_digest"]), _short(r["source_hash"]), _pooled(r["pooled_speedup"], r["ci_low"], r["ci_high"], r["measurements"]), r["runs"], r["set_aside"], f"{r['first_run_id']}/{r['first_candidate_id']}", f"{r['triton_version']} / {r['torch_version']}"] for r in data["history_sources"]],
    )  # fmt: skip
    sources.lines = [
        "every decision and final revalidation of a source, in any run, pooled into one speedup "
        "against the baseline (inverse-variance weighted in log space; docs/STORE.md, source_estimates)"
    ]
    runs = Section("Runs").table(
        ["run", "started", "device", "status", "provider", "candidates", "winner", "its source", "its pooled speedup [99% CI]", "stopping reason"],
        [[r["run_id"], r["started_at"], r["device_kind"], r["status"], r["provider"], r["candidates"], r["winner_id"], _short(r["winner_source_hash"]), _pooled(r["winner_pooled_speedup"], r["winner_pooled_ci_low"], r["winner_pooled_ci_high"], r["winner_measurements"]), r["stopping_reason"]] for r in data["history_runs"]],
    )  # fmt: skip
    trends = Section("Baseline and best over time").table(
        ["device", "run", "case", "baseline median (us)", "best", "its median (us)", "its source", "its pooled speedup [99% CI]"],
        [[r["device_kind"], r["run_id"], r["case_id"], r["baseline_median_us"], r["best_candidate_id"], r["best_median_us"], _short(r["best_source_hash"]), _pooled(r["pooled_speedup"], r["pooled_ci_low"], r["pooled_ci_high"], r["pooled_measurements"])] for r in data["history_trends"]],
    )  # fmt: skip
    trends.figures.append(("trends.svg", plots.trends(data["history_trends"])))
    runs_by_id = {r["run_id"]: r for r in data["history_runs"]}
    env = _environment_section(
        data.get("environments", []),
        {run_id: r["device_kind"] or "" for run_id, r in runs_by_id.items()},
    )
    ex = Section("Refused changes, by bundle and device").table(
        ["signature", "outcome", "device", "bundle", "times", "runs", "last reason"],
        [[r["signature"], r["outcome"], r["device_kind"], _short(r["bundle_digest"]), r["occurrences"], r["runs"], r["last_reason"]] for r in data["history_exclusions"]],
    )  # fmt: skip
    return [kh, sources, runs, trends, env, ex]


def history_params(kernel: str) -> dict[str, str]:
    """HISTORY_QUERIES' parameters for what `tlxdb history KERNEL` was given: the kernel's names
    as typed, and as a bundle digest prefix (with "sha256:" whether typed or not)."""
    return {"kernel": kernel, "digest": tagged_prefix(kernel)}


def write_history_report(store: Store, kernel: str, to_dir: Path) -> Written:
    """report.md, report.html and figures for every run of a kernel (its kernel_id, entry point
    or normalized path) or bundle (a digest prefix, "sha256:" optional), from the views."""
    data = queries.report(store, HISTORY_QUERIES, history_params(kernel))
    if not data["history_runs"]:
        rows = queries.report(store, ("history_names",), {})["history_names"]
        kernels = sorted({r["entry_point"] for r in rows if r["entry_point"]})
        names = sorted({*kernels, *(r["kernel_id"] for r in rows if r["kernel_id"])})
        within = [n for n in kernels if kernel.lower() in n.lower()]  # "add" -> add_kernel
        close = list(
            dict.fromkeys([*within, *difflib.get_close_matches(kernel, names, cutoff=0.5)])
        )[:3]
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        raise UnknownRunError(
            f"no run of kernel or bundle {kernel!r} in store {store.location}; {hint}"
            'see `tlxdb query "SELECT kernel_id, bundle_digest FROM kernel_history"`'
        )
    run_ids = [r["run_id"] for r in data["history_runs"]]
    data |= queries.report(store, ("environments",), {"run_ids": run_ids})
    sections = history_sections(kernel, data)
    return Written(_write(f"tlxdb history of {kernel}", sections, to_dir), _warnings(sections))
