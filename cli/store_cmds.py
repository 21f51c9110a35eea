"""Commands over the evidence store: runs, query, export, import, push, pull.

Each parses, calls one library function, and renders; the group (cli/group.py) turns domain
errors into one-line errors (exit 1). Results go to stdout.
"""

from __future__ import annotations

import csv
import io
import json
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cli.options import open_store, store_option, with_default

if TYPE_CHECKING:  # the store's modules are imported in the commands: `tlxdb --help` stays fast
    import pyarrow as pa

RUNS_SQL = "runs_listing"


def _format_option(f: Any) -> Any:
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(["table", "csv", "json"]),
        default="table",
        show_default=True,
        help="How rows are printed.",
    )(f)


def _cell(value: Any, exact: bool = False) -> str:
    """A value as text; floats rounded to 6 digits for reading, or (exact) the shortest text
    that reads back as the same double."""
    if value is None:
        return ""
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, float):
        return repr(value) if exact else f"{value:.6g}"
    return str(value)


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    return str(value)


def render(table: pa.Table, fmt: str) -> str:
    """The rows of `table` as an aligned text table, CSV or a JSON list of objects."""
    from tlxstore.store.sql import JSON_FIELD

    names = table.column_names
    if fmt == "json":  # each value of a JSON column nested as it is, not as an escaped string
        nested = [f.name for f in table.schema if (f.metadata or {}) == JSON_FIELD]
        rows = table.to_pylist()
        for r in rows:
            for n in nested:
                r[n] = None if r[n] is None else json.loads(r[n])
        return json.dumps(rows, default=_jsonable, ensure_ascii=False, indent=1)
    rows = table.to_pylist()
    if fmt == "csv":  # full precision: every double reads back as itself
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(names)
        writer.writerows([[_cell(r[n], exact=True) for n in names] for r in rows])
        return buf.getvalue().rstrip("\n")
    cells = [[_cell(r[n]).replace("\n", " ") for n in names] for r in rows]
    widths = [max([len(n)] + [len(c[i]) for c in cells]) for i, n in enumerate(names)]
    lines = ["  ".join(n.ljust(w) for n, w in zip(names, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]
    lines.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(lines)


@click.command("runs")
@store_option
@_format_option
def runs_cmd(store: Path, fmt: str) -> None:
    """The runs in the store, newest first."""
    import queries

    table = queries.query(open_store(store, create=False), queries.statement(RUNS_SQL))
    click.echo(render(table, fmt))


@click.command("query")
@click.argument("sql")
@store_option
@_format_option
@click.option(
    "--allow-files",
    is_flag=True,
    help="Let the query read your own files too (read_parquet, read_csv); it still writes "
    "nothing.  [default: off]",
)
def query_cmd(sql: str, store: Path, fmt: str, allow_files: bool) -> None:
    """Run one read-only SQL SELECT over the store's views.

    The query runs in a sandbox: it reads the store and nothing else (no files, no extensions,
    no writes; see docs/QUERY.md).

    \b
    Views (each with its columns and an example question in docs/STORE.md): runs,
    candidates, decisions, samples, case_results, case_speedups, revalidations, duplicates,
    integrity_flags, builds, verifications, infrastructure_failures, throughput, profiles,
    rooflines, exclusions, excluded_signatures, seen_sources, model_exchanges, commits,
    run_identity, run_settings, kernel_history, trends (and the table `events`).
    Examples:
      tlxdb query "SELECT kernel_id, device_kind, best_revalidated_speedup FROM kernel_history"
      tlxdb query --allow-files "SELECT * FROM read_parquet('mine.parquet') LIMIT 5"
    """
    import queries
    from tlxstore.errors import QueryFenceError
    from tlxstore.store.connection import Sandbox

    try:
        table = queries.query(
            open_store(store, create=False), sql, sandbox=Sandbox(allow_files=allow_files)
        )
    except QueryFenceError as exc:
        if allow_files:
            raise
        raise click.ClickException(
            f"{exc.message} (a query reads only the store; --allow-files lets it read your files)"
        ) from None
    click.echo(render(table, fmt))


@click.command("export")
@click.argument("runs", nargs=-1)
@click.option(
    "--to",
    "to",
    required=True,
    type=click.Path(path_type=Path),
    help="A new folder for the export of runs; with --view, a new .parquet file.",
)
@click.option(
    "--view",
    "view_name",
    help=with_default("Export one view's rows as a Parquet file instead.", "export runs"),
)
@store_option
def export_cmd(runs: tuple[str, ...], to: Path, view_name: str | None, store: Path) -> None:
    """Export runs (ids, unique prefixes or output folders) as Parquet plus a manifest, or one
    view as a Parquet file (typed columns, JSON columns as nested structs).

    \b
    Examples:
      tlxdb export r20261130-161908 --to /tmp/softmax-run
      tlxdb export --view kernel_history --to kernel_history.parquet
    """
    import queries
    from tlxstore.export import export_runs

    if view_name is not None:
        if runs:
            raise click.UsageError("give runs or --view, not both")
        rows = queries.export_view(open_store(store, create=False), view_name, to)
        click.echo(json.dumps({"to": str(to), "view": view_name, "rows": rows}))
        return
    if not runs:
        raise click.UsageError("give the runs to export, or --view NAME")
    manifest = export_runs(open_store(store, create=False), runs, to)
    rows = manifest.files["events.parquet"].rows
    click.echo(json.dumps({"to": str(to), "runs": manifest.runs, "events": rows}))


@click.command("import")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@store_option
def import_cmd(paths: tuple[Path, ...], store: Path) -> None:
    """Import tlxdb exports, tlxdb output folders and TLX agent output folders (idempotent)."""
    import importers
    from optimizer.decision.identity import normalized_source

    report = importers.import_paths(
        open_store(store, create=True), paths, normalize=normalized_source
    )
    click.echo(report.model_dump_json())


def _other_store(ctx: click.Context, param: click.Parameter, value: str) -> Any:
    from tlxstore.config import store_ref

    return store_ref(value)


@click.command("push")
@click.argument("runs", nargs=-1)
@click.option(
    "--to",
    "target",
    required=True,
    metavar="URL|PATH",
    callback=_other_store,
    help="The store to copy into, usually the team store (ducklake:postgres://...).",
)
@store_option
def push_cmd(runs: tuple[str, ...], target: Any, store: Any) -> None:
    """Copy runs (ids, unique prefixes or output folders; all when none is named) from the
    store into another store. Idempotent: pushing again adds nothing, and a run that went on
    adds only its new events. All or nothing.

    \b
    Examples:
      tlxdb push --to 'ducklake:postgres://me@db/tlxdb?data_path=s3://team/tlxdb'
      tlxdb push r20261201-1a2b --store local.duckdb --to "$TEAM_STORE"
    """
    from tlxstore.transfer import copy_runs

    report = copy_runs(
        open_store(store, create=False), lambda: open_store(target, create=True), runs
    )
    click.echo(report.model_dump_json())


@click.command("pull")
@click.argument("runs", nargs=-1)
@click.option(
    "--from",
    "source",
    required=True,
    metavar="URL|PATH",
    callback=_other_store,
    help="The store to copy from, usually the team store (ducklake:postgres://...).",
)
@store_option
def pull_cmd(runs: tuple[str, ...], source: Any, store: Any) -> None:
    """Copy runs (ids or unique prefixes; all when none is named) from another store, usually
    the team store, into the store. Idempotent and all or nothing, as push.

    \b
    Examples:
      tlxdb pull --from 'ducklake:postgres://me@db/tlxdb'          # every run of the team
      tlxdb pull r20261201-1a2b --from "$TEAM_STORE" --store local.duckdb
    """
    from tlxstore.transfer import copy_runs

    report = copy_runs(
        open_store(source, create=False), lambda: open_store(store, create=True), runs
    )
    click.echo(report.model_dump_json())


COMMANDS = (runs_cmd, query_cmd, export_cmd, import_cmd, push_cmd, pull_cmd)
