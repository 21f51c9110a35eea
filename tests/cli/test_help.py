"""The command line explains itself: every option of every command (the click tree walked) has a
description that says its default, and `tlxdb --help`, `tlxdb optimize --help` and `tlxdb runs`
import neither the optimizer nor matplotlib nor torch (what lets them start fast; the start-up
times themselves are benchmarks/cli_startup.py's, not a test's)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import click
import pytest
from click.testing import CliRunner

from cli.main import main
from tlxstore.store import Store


def commands(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[str, click.Command]]:
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))
        else:
            yield " ".join((*path, name)), command


def test_every_option_of_every_command_has_a_help_text_with_its_default():
    missing = []
    names = []
    for name, command in commands(main):
        names.append(name)
        ctx = click.Context(command, info_name=name)
        for param in command.params:
            if not isinstance(param, click.Option) or param.name in {"help", "version"}:
                continue
            if param.hidden:  # a former spelling (--replay-run), not shown by --help
                continue
            record = param.get_help_record(ctx)
            text = record[1] if record else ""
            if "[default:" not in text and "required]" not in text:
                missing.append(f"tlxdb {name} {param.opts[0]}: {text!r}")
    assert missing == []
    assert {"optimize", "runs", "history", "bundle new"} <= set(names)


def test_the_budget_flags_say_the_tlx_agents_defaults():
    out = CliRunner().invoke(main, ["optimize", "--help"], terminal_width=200)
    assert out.exit_code == 0
    options = " ".join(out.stdout[out.stdout.index("Options:") :].split())
    for flag, default in [
        ("--max-rounds", "5"),
        ("--candidates-per-round", "2"),
        ("--max-candidate-seconds", "600.0"),
        ("--max-total-seconds", "3600.0"),
        ("--min-speedup", "1.01"),
        ("--max-cv", "0.1"),
        ("--benchmark-repetitions", "10"),
    ]:
        start = options.index(flag + " ")
        end = options.index("[default:", start)
        assert options[end:].startswith(f"[default: {default}]"), flag


HEAVY = ("optimizer", "matplotlib", "torch", "triton", "litellm", "jinja2", "profilers")


@pytest.mark.parametrize(
    ("args", "also_absent"),
    [
        (["--help"], ("duckdb", "pyarrow", "tlxstore.store", "queries")),
        (["optimize", "--help"], ("duckdb", "pyarrow", "tlxstore.store")),
        (["bundle", "new", "--help"], ("duckdb", "pyarrow")),
        (["runs"], ("tlxstore.events", "tlxstore.codec")),  # a query decodes no event
    ],
)
def test_help_and_runs_import_nothing_they_do_not_use(tmp_path, args, also_absent):
    store = tmp_path / "store.duckdb"
    Store(store).close()
    code = (
        "import json, sys\nfrom cli.main import main\n"
        f"try:\n    main({args!r})\nexcept SystemExit:\n    pass\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"TLXDB_STORE": str(store), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    unwanted = [m for m in loaded if m.split(".")[0] in HEAVY or m.startswith(also_absent or "@")]
    assert unwanted == []


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["optimize", "--outt", "x"], "Did you mean one of: '--out', '--output-dir'?"),
        (["optimize", "--max-rounds", "abc"], "'abc' is not a valid integer"),
        (["bundle", "new", "--bogus"], "No such option '--bogus'"),
        (["--bogus"], "No such option '--bogus'"),
        (["nosuch"], "No such command 'nosuch'"),
    ],
)
def test_a_usage_error_exits_1_not_2_which_means_a_run_without_a_winner(args, says):
    """click exits 2 on a usage error; tlxdb's 2 is a finished run without a winner
    (docs/CONTRACT.md), so a typo exits 1 with click's one-line reason, as bad input does."""
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 1, r.output
    assert says in r.stderr and "Traceback" not in r.output


def test_optimize_takes_out_for_the_output_folder_as_bundle_new_does():
    option = next(p for p in main.commands["optimize"].params if p.name == "output_dir")
    assert "--out" in option.opts and "--output-dir" in option.opts
