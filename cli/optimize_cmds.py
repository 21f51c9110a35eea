"""Commands that run or re-read optimizations: optimize, validate, show, report, replay.

Each command parses, calls one library function, and renders; the group (cli/group.py) turns
domain errors into one-line errors (exit 1). Results go to stdout, the live log to stderr.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import click

from cli.options import BudgetOption, open_store, store_option, with_default
from cli.terminal import for_stream

if TYPE_CHECKING:  # imported where used: `tlxdb --help` must not load the optimizer
    from optimizer.bundle.loading import BundlePaths
    from optimizer.bundle.scaffold import Validated
    from optimizer.reporting.result import RunResult
    from optimizer.run import lifecycle
    from tlxstore.events import Envelope
    from tlxstore.fold import RunState


def _bundle_options(f: Any) -> Any:
    opts = [
        click.option(
            "--kernel",
            type=click.Path(path_type=Path),
            required=False,
            help="The kernel: one Python file (optimize --resume takes none).  [required]",
        ),
        click.option(
            "--bundle",
            "bundle_dir",
            type=click.Path(path_type=Path),
            help=with_default(
                "The bundle folder (harness.py, cases.json, target.json, [budget.json], "
                "[reference_kernel.py]); `tlxdb bundle new` writes one.",
                "none: give --bundle or --harness, --cases and --target",
            ),
        ),
        click.option(
            "--harness",
            type=click.Path(path_type=Path),
            help=with_default("harness.py, instead of --bundle.", "the --bundle folder's"),
        ),
        click.option(
            "--cases",
            type=click.Path(path_type=Path),
            help=with_default("cases.json, instead of --bundle.", "the --bundle folder's"),
        ),
        click.option(
            "--target",
            type=click.Path(path_type=Path),
            help=with_default("target.json, instead of --bundle.", "the --bundle folder's"),
        ),
        click.option(
            "--budget",
            type=click.Path(path_type=Path),
            help=with_default(
                "A budget.json whose values override the budget flags (as in the TLX agent); "
                "a budget.json found in --bundle DIR yields to the flags you type.",
                "the --bundle folder's budget.json, if any",
            ),
        ),
        click.option(
            "--reference-kernel",
            "reference",
            type=click.Path(path_type=Path),
            help=with_default(
                "A trusted correctness oracle handed to the harness and the agents.",
                "the --bundle folder's reference_kernel.py, if any",
            ),
        ),
        click.option(
            "--arch",
            help=with_default(
                "The architecture the run must measure on (sm_90, hopper, H100, sm_100, "
                "gfx942 ...); a device of another architecture is an error.",
                "target.json's architecture",
            ),
        ),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


_BUDGET_HELP = {  # each flag's default is the TLX agent's (BudgetOption prints it)
    "--max-rounds": (int, "Rounds of proposals before the search ends."),
    "--candidates-per-round": (int, "Candidates proposed (and evaluated) per round."),
    "--max-candidate-seconds": (
        float,
        "Seconds one candidate's evaluation (build, verify, benchmark, profile) may take "
        "before its child is killed (an infrastructure failure, not a measurement).",
    ),
    "--max-total-seconds": (float, "Seconds the whole search may take; then it ends."),
    "--min-speedup": (
        float,
        "The weighted geomean speedup over the baseline a candidate needs to be promoted "
        "(its 99% CI's low end must also be above 1, and above this on a noisy case).",
    ),
    "--max-cv": (
        float,
        "The coefficient of variation (stdev/mean of a case's samples) above which a case is "
        "noisy: it is measured again (--max-extra-blocks) and then decided on its interval, with "
        "a note (--strict-noise rejects it instead).",
    ),
    "--benchmark-repetitions": (int, "Samples per case per candidate (harness benchmark())."),
}


def _budget_options(f: Any) -> Any:
    opts = [
        click.option(
            flag,
            type=kind,
            cls=BudgetOption,
            help=f"{text} Overrides the bundle folder's budget.json; a --budget file overrides it.",
        )
        for flag, (kind, text) in _BUDGET_HELP.items()
    ] + [
        click.option(
            "--max-extra-blocks",
            type=int,
            help=with_default(
                "Alternation blocks a candidate may get beyond its first ones while a case stays "
                "noisier than --max-cv (0: measure no more). docs/GUARDS.md, 'Noisy cases'.",
                6,
            ),
        ),
        click.option(
            "--strict-noise/--no-strict-noise",
            default=None,
            help=with_default(
                "The TLX agent's rule: a case noisier than --max-cv blocks promotion whatever its "
                "interval. Off: such a candidate is promoted when its whole interval lies above "
                "--min-speedup, with a note naming the case.",
                "off",
            ),
        ),
        click.option(
            "--replicates",
            type=int,
            help=with_default(
                "Independent replicates of the final revalidation, each in a fresh child. "
                "docs/GUARDS.md, 'Replicates'.",
                "3 on a GPU, 1 on the CPU interpreter",
            ),
        ),
        click.option(
            "--replicate-tolerance",
            type=float,
            help=with_default(
                "How far the replicates' speedups may spread (max / min - 1) and agree; spread "
                "further, the winner is kept, with a note, only when each replicate is at least "
                "--min-speedup (under --strict-noise: not kept).",
                0.02,
            ),
        ),
        click.option(
            "--history-seeds",
            type=int,
            help=with_default(
                "How many configurations of the kernel's nearest history (other runs' winners on "
                "other cases, versions or GPUs of the family) tune re-measures first (0: none). "
                "docs/TUNE.md, 'Seeds from the nearest history'.",
                2,
            ),
        ),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


class LiveLog:
    """The live log on stderr: one line per step; a progress line at the bottom on a terminal."""

    def __init__(self, stream: IO[str], tty: bool) -> None:
        from tlxstore.redaction import Redactor

        self.stream = stream
        self.tty = tty
        self._t0 = time.monotonic()
        self._progress = ""
        self.redactor = Redactor.from_environment()

    def __call__(self, env: Envelope, state: RunState) -> None:
        from optimizer.reporting import live

        line = live.describe(env, state)
        if self.tty and self._progress:
            self.stream.write("\r\033[K")
        if line is not None:
            self.stream.write(for_stream(self.redactor.text(line), self.stream) + "\n")
        if self.tty:
            self._progress = self._status(env, state)
            self.stream.write(self._progress)
        self.stream.flush()

    def _status(self, env: Envelope, state: RunState) -> str:
        from tlxstore.events import CandidateProposed

        s = state.started
        if s is None:
            return ""
        t = s.thresholds
        decided = sum(1 for c in state.candidates.values() if c.decision is not None)
        current = next((c.proposal for c in reversed(state.candidates.values())), None)
        rnd = current.round if isinstance(current, CandidateProposed) else 0
        return (
            f"[round {rnd}/{t.max_rounds} · {decided} decided of {t.max_rounds * t.candidates_per_round}"
            f" · best {state.incumbent_id or '-'} · {time.monotonic() - self._t0:.0f} s]"
        )

    def close(self) -> None:
        if self.tty and self._progress:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self._progress = ""


def _render(result: RunResult, fmt: str) -> None:
    from tlxstore.redaction import Redactor

    redactor = Redactor.from_environment()
    if fmt == "full":
        click.echo(redactor.text(result.model_dump_json()))
    elif fmt == "summary":
        click.echo(redactor.text(json.dumps(result.summary(), default=str)))


@click.command()
@_bundle_options
@click.option(
    "--output-dir",
    "--out",
    "output_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help=with_default(
        "Where the run writes its artifacts (events.jsonl, best_kernel.py, result.json, "
        "report.md, experiments/).",
        "<store folder>/runs/<run id>",
    ),
)
@store_option
@click.option(
    "--prior-run",
    "prior_runs",
    multiple=True,
    help=with_default(
        "A run id (or unique prefix), tlxdb output folder or TLX agent output folder whose "
        "evidence informs this run; repeatable. Its winner is never adopted.",
        "none",
    ),
)
@click.option(
    "--resume",
    "resume_ref",
    help=with_default(
        "Continue an interrupted run (run id or output folder); takes no other settings.",
        "start a new run",
    ),
)
@click.option(
    "--provider",
    default=None,
    help=with_default(
        "Who proposes candidates: tune (no model), llm, command (an external agent) or "
        "remeasure (history measured again here: --remeasure-run's candidates, or the kernel's "
        "nearest history); 'replay' is its former name.",
        "tune, or llm with --model",
    ),
)
@click.option(
    "--model",
    help=with_default(
        "The model for --provider llm: any litellm name (openai/gpt-4o, anthropic/..., "
        "or openai/NAME with --api-base for a local server).",
        "none",
    ),
)
@click.option(
    "--api-base",
    help=with_default(
        "An OpenAI-compatible server for --provider llm, e.g. http://127.0.0.1:8000/v1.",
        "the model provider's own endpoint",
    ),
)
@click.option(
    "--provider-command",
    help=with_default(
        "The agent command for --provider command; it edits candidate.py in its workspace.",
        "none",
    ),
)
@click.option(
    "--remeasure-run",
    help=with_default(
        "The run whose candidates --provider remeasure re-proposes.",
        "the kernel's nearest history",
    ),
)
@click.option(
    "--replay-run",
    "replay_run",
    hidden=True,
    help=with_default("The former name of --remeasure-run.", "none"),
)
@_budget_options
@click.option(
    "--commit-winner/--no-commit-winner",
    default=True,
    help="Commit the revalidated winner to the kernel's git or Mercurial repository.  "
    "[default: --commit-winner]",
)
@click.option(
    "--commit-message",
    help=with_default("Subject line of the winner's commit.", "written from the winner's change"),
)
@click.option(
    "--vcs",
    type=click.Choice(["auto", "git", "hg"]),
    default="auto",
    show_default=True,
    help="The repository kind the winner is committed to (auto: found from the kernel's path).",
)
@click.option(
    "--result-format",
    type=click.Choice(["full", "summary", "none"]),
    default="full",
    show_default=True,
    help="What stdout gets at the end: the whole result JSON, its short form, or nothing.",
)
@click.option(
    "--profile",
    is_flag=True,
    help="Accepted for TLX compatibility: profiling is always on.  [default: off]",
)
@click.option(
    "--diagnostic-proton-intra-kernel",
    is_flag=True,
    help="Accepted for TLX compatibility; intra-kernel Proton is not collected (a note says "
    "so).  [default: off]",
)
@click.option("--label", help=with_default("A free-text label recorded with the run.", "none"))
@click.option(
    "--strict-validation",
    is_flag=True,
    help="Make every validation warning a failure (for CI pipelines of bundles).  [default: off]",
)
@click.option(
    "--devices",
    help=with_default(
        "Evaluate each round's candidates at once, one harness child per device: 'all' or "
        "indexes such as 0,1,3 (pinned with CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES). A "
        "round larger than the device count queues. Testing only: TLXDB_SIMULATED_DEVICES=N "
        "gives a CPU target N simulated devices (the run records them as simulated).",
        "one candidate at a time on the first device",
    ),
)
def optimize(
    resume_ref: str | None,
    store: Path,
    result_format: str,
    diagnostic_proton_intra_kernel: bool,
    **settings: Any,
) -> None:
    """Optimize a kernel against a frozen target bundle (build, verify, benchmark, profile, decide).

    Exit status: 0 a winner survived final revalidation; 2 no qualifying winner; 3 the winner is
    kept in the output folder, not committed (the commit failed, or your kernel or bundle
    changed during the run); 130 interrupted (continue with --resume); 1 bad input.

    \b
    Examples:
      tlxdb optimize --kernel examples/softmax/kernel.py --bundle examples/softmax/host --no-commit-winner
      tlxdb optimize --kernel k.py --bundle b/ --prior-run r20261130-101500-1a2b3c
      tlxdb optimize --kernel k.py --bundle b/ --provider llm --model openai/gpt-4o
      tlxdb optimize --kernel k.py --bundle b/ --provider command --provider-command "codex exec"
      tlxdb optimize --kernel k.py --bundle b/ --devices all --candidates-per-round 8
      TLXDB_SIMULATED_DEVICES=4 tlxdb optimize --kernel k.py --bundle cpu_b/ --devices all
      tlxdb optimize --resume r20261130-101500-1a2b3c
    """
    from optimizer.reporting.result import EXIT_INTERRUPTED
    from optimizer.run import lifecycle
    from tlxstore.errors import RunInterruptedError
    from tlxstore.redaction import Redactor

    if diagnostic_proton_intra_kernel:
        click.echo(
            "note: --diagnostic-proton-intra-kernel is accepted for TLX compatibility; tlxdb "
            "collects kernel-level Proton (and ncu) profiles, not intra-kernel timelines",
            err=True,
        )
    _renamed(settings)
    live = LiveLog(sys.stderr, sys.stderr.isatty())
    try:
        if resume_ref is not None:
            given = {_RESUME_NAMES.get(k, k): v for k, v in settings.items()}
            result = lifecycle.resume(resume_ref, store, observer=live, given=given)
        else:
            result = lifecycle.optimize(_run_request(store, settings), observer=live)
    except KeyboardInterrupt:
        live.close()
        click.echo("interrupted before the run started; nothing was written", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except RunInterruptedError as e:  # a full disk: --resume continues the run
        live.close()
        click.echo(f"Error: {Redactor.from_environment().text(e.message)}", err=True)
        sys.exit(EXIT_INTERRUPTED)
    finally:
        live.close()
    _render(result, result_format)
    for line in result.notes:
        click.echo(f"note: {Redactor.from_environment().text(line)}", err=True)
    sys.exit(result.exit_code)


def _renamed(settings: dict[str, Any]) -> None:
    """The former spellings of the remeasure provider, taken in `settings` as the new ones, with
    one line each on stderr: "replay" now names only re-deciding a run (`tlxdb replay`)."""
    if settings.get("provider") == "replay":
        click.echo("note: --provider replay is renamed --provider remeasure", err=True)
        settings["provider"] = "remeasure"
    old_run = settings.pop("replay_run", None)
    if old_run is not None:
        click.echo("note: --replay-run is renamed --remeasure-run", err=True)
        if settings.get("remeasure_run") not in (None, old_run):
            raise click.UsageError("give one of --remeasure-run and --replay-run")
        settings["remeasure_run"] = old_run


# this command's parameter names where the run layer names the setting otherwise
_RESUME_NAMES = {"bundle_dir": "bundle", "prior_runs": "prior_run"}


def _run_request(store: Path, s: dict[str, Any]) -> lifecycle.RunRequest:
    """What `tlxdb optimize` asks of a new run, from its parameters `s`."""
    from optimizer.bundle.loading import FLAG_DEFAULTS
    from optimizer.providers import ProviderOptions
    from optimizer.run import lifecycle

    if s["kernel"] is None:
        raise click.ClickException("missing --kernel (the kernel file to optimize)")
    flags = {name: s[name] for name in FLAG_DEFAULTS}
    paths = _located(
        s["bundle_dir"], s["harness"], s["cases"], s["target"], s["budget"], s["reference"], flags
    )
    return lifecycle.RunRequest(
        kernel=s["kernel"].resolve(),
        bundle=paths,
        store=store,
        output_dir=s["output_dir"],
        flags=flags,
        provider=s["provider"],
        provider_options=ProviderOptions(
            model=s["model"],
            api_base=s["api_base"],
            command=s["provider_command"],
            remeasure_run=s["remeasure_run"],
        ),
        prior_runs=list(s["prior_runs"]),
        commit=lifecycle.CommitOptions.model_validate(
            {"enabled": s["commit_winner"], "message": s["commit_message"], "vcs": s["vcs"]}
        ),
        arch=s["arch"],
        argv=sys.argv,
        label=s["label"],
        strict_validation=s["strict_validation"],
        devices=s["devices"],
    )


def _located(
    bundle_dir: Path | None,
    harness: Path | None,
    cases: Path | None,
    target: Path | None,
    budget: Path | None,
    reference: Path | None,
    budget_flags: dict[str, Any],
) -> BundlePaths:
    """The bundle's files; a note on stderr for each typed flag budget.json disagrees with,
    saying which wins."""
    from optimizer.bundle.loading import budget_overrides, locate

    paths = locate(
        bundle_dir, harness=harness, cases=cases, target=target, budget=budget, reference=reference
    )
    for line in budget_overrides(budget_flags, paths):
        click.echo(f"note: {line}", err=True)
    return paths


@click.command()
@_bundle_options
@_budget_options
@click.option(
    "--strict-validation",
    is_flag=True,
    help="Make every warning a failure (for CI pipelines of bundles).  [default: off]",
)
def validate(
    strict_validation: bool,
    kernel: Path | None,
    bundle_dir: Path | None,
    harness: Path | None,
    cases: Path | None,
    target: Path | None,
    budget: Path | None,
    reference: Path | None,
    arch: str | None,
    **budget_flags: Any,
) -> None:
    """Validate a bundle and kernel alone (docs/VALIDATION.md): a PASS/WARN/FAIL table on stdout, each warning once on
    stderr; exit 1 when a check fails (with --strict-validation, also when one warns).

    \b
    Examples:
      tlxdb validate --kernel k.py --bundle b/
      tlxdb validate --kernel k.py --bundle b/ --strict-validation
    """
    if kernel is None:
        raise click.ClickException(
            "missing --kernel (the kernel file the bundle is validated with)"
        )
    from optimizer.run import lifecycle

    paths = _located(bundle_dir, harness, cases, target, budget, reference, budget_flags)
    rep = lifecycle.validate_only(
        kernel.resolve(), paths, budget_flags, arch, strict=strict_validation
    )
    render_validation(rep)
    if not rep.passed:
        failed = next(c for c in rep.checks if not c.passed)
        raise click.ClickException(
            f"validation failed ({failed.name}); the bundle cannot protect an optimization"
        )


def render_validation(rep: Validated) -> None:
    """The device line and the PASS/WARN/FAIL table on stdout, each warning once on stderr."""
    from optimizer.reporting import live

    click.echo(f"device: {rep.device.kind} ({rep.device.backend}, {rep.device.architecture})")
    width = max(len(c.name) for c in rep.checks)
    for c in rep.checks:
        click.echo(f"{c.outcome.value.upper():<4}  {c.name:<{width}}  {c.detail}")
    for line in live.warning_lines(rep.checks):
        click.echo(line, err=True)


def _run_envelopes(store: Path, ref: str) -> list[Envelope]:
    s = open_store(store, create=False)
    return s.run_envelopes(s.resolve_run(ref))


@click.command()
@click.argument("run")
@store_option
def show(run: str, store: Path) -> None:
    """One run's timeline: every candidate, its evidence and its decision.

    RUN is a run id, a unique prefix of one, or an output folder.
    """
    from optimizer.reporting import live

    envs = _run_envelopes(store, run)
    for line in live.timeline(envs):
        click.echo(for_stream(line, sys.stdout))


@click.command("report")
@click.argument("run")
@store_option
@click.option(
    "--to",
    "to_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help=with_default(
        "Where to write report.md, report.html and the figures.",
        "the run's output folder when it holds the run's own log, else the current folder",
    ),
)
def report_cmd(run: str, store: Path, to_dir: Path | None) -> None:
    """Write a run's Markdown and HTML report with its figures, from the store's views, and
    print the paths written; on stderr, a warning where the run and its prior runs differ in
    their environment (driver, clocks, power limit, NUMA node, CPUs).

    \b
    Example: tlxdb report r20261130-161908 --to /tmp/rep
    """
    from optimizer.reporting import from_views

    s = open_store(store, create=False)
    run_id = s.resolve_run(run)
    to_dir = to_dir or from_views.report_folder(s, run_id)
    written = from_views.write_run_report(s, run_id, to_dir)
    for p in written.paths:
        click.echo(str(p))
    for line in written.warnings:  # the environments' values are the evidence's text
        click.echo(for_stream(line, sys.stderr), err=True)


@click.command("history")
@click.argument("kernel")
@store_option
@click.option(
    "--to",
    "to_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="A folder for report.md, report.html and the figures.",
)
def history_cmd(kernel: str, store: Path, to_dir: Path) -> None:
    """Write the cross-run report of a kernel or bundle: the best ever per bundle and device,
    every run, baseline and best per case over time, what was refused (Markdown and HTML with
    figures, from the store's views); prints the paths written, and on stderr a warning where
    runs on one kind of device differ in their environment.

    KERNEL is a kernel_id ("softmax_kernel @ softmax/kernel.py"), the Triton kernel's name (the
    first @triton.jit function the file launches, "softmax_kernel"; not the Python function that
    `bundle new --entry` names), a normalized path ("softmax/kernel.py") or a bundle digest
    prefix ("3f2a9c", with or without "sha256:").

    \b
    Examples:
      tlxdb history softmax_kernel --to /tmp/softmax-history
      tlxdb history 3f2a9c --to /tmp/bundle-history
    """
    from optimizer.reporting import from_views

    written = from_views.write_history_report(open_store(store, create=False), kernel, to_dir)
    for p in written.paths:
        click.echo(str(p))
    for line in written.warnings:  # the environments' values are the evidence's text
        click.echo(for_stream(line, sys.stderr), err=True)


@click.command()
@click.argument("run")
@store_option
@click.option(
    "--min-speedup",
    type=float,
    help=with_default("Re-decide under this minimum speedup.", "the run's own"),
)
@click.option(
    "--max-cv", type=float, help=with_default("Re-decide under this maximum CV.", "the run's own")
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="How the decisions are printed.",
)
def replay(
    run: str, store: Path, min_speedup: float | None, max_cv: float | None, fmt: str
) -> None:
    """Rebuild a run from its events and re-decide it, optionally under other thresholds.

    RUN is a run id, a unique prefix of one, or an output folder.
    """
    from optimizer.run import redecide

    outcome = redecide.redecide(_run_envelopes(store, run), min_speedup=min_speedup, max_cv=max_cv)
    if fmt == "json":
        click.echo(outcome.model_dump_json())
        return
    click.echo(
        f"thresholds: min speedup {outcome.thresholds.min_speedup}, max CV {outcome.thresholds.max_cv}"
    )
    for r in outcome.decisions:
        mark = "  " if r.recorded == r.replayed else "* "
        click.echo(
            f"{mark}{r.candidate_id:<10} recorded {r.recorded.value:<9} replayed {r.replayed.value:<9} {r.reason}"
        )
    click.echo(
        f"winner: recorded {outcome.recorded_best or 'none'}, replayed {outcome.replayed_best or 'none'}"
    )


COMMANDS = (optimize, validate, show, report_cmd, history_cmd, replay)
