"""Driving the real CLI in tests: its one-line errors, and a small `tlxdb optimize`."""

from __future__ import annotations

import sys
from pathlib import Path

TLXDB = str(Path(sys.executable).parent / "tlxdb")  # the console script, for real processes


def one_error_line(result) -> str:
    """The one line a CliRunner result's failure printed (exit 1, `Error: ...`, no traceback),
    without its `Error: `."""
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("Error: ")
    return line.removeprefix("Error: ")


def small_optimize(kernel: Path, bundle: Path, store: Path, out: Path) -> list[str]:
    """`tlxdb optimize` arguments of a one-candidate run (no commit) on the interpreter."""
    return [
        "optimize",
        "--kernel",
        str(kernel),
        "--bundle",
        str(bundle),
        "--store",
        str(store),
        "--output-dir",
        str(out),
        "--no-commit-winner",
        "--max-rounds",
        "1",
        "--candidates-per-round",
        "1",
        "--benchmark-repetitions",
        "5",
        "--max-cv",
        "5",
    ]
