"""docs/TUTORIAL.md as a user follows it on the CPU: its add.py and its `tlxdb bundle new`,
`tlxdb optimize` (with a smaller budget) and `tlxdb report` commands run as written, and the
report's figures render in a real headless Chromium: each figure and the page, screenshotted,
drawn and in colour."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.browser import coloured, drawn, screenshot

from cli.main import main

REPO = Path(__file__).resolve().parent.parent
TUTORIAL = REPO / "docs" / "TUTORIAL.md"
SMALLER = ["--max-rounds", "1", "--candidates-per-round", "1"]  # budget.json: 5 samples


def blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


def first_command(text: str, start: str) -> list[str]:
    """The first command of the tutorial's shell blocks that starts with `start`, as argv."""
    lines = [line for block in blocks(text, "sh") for line in block.splitlines()]
    line = next(line for line in lines if line.startswith(start))
    return shlex.split(line.split("  #")[0])[1:]  # without "tlxdb"


def cli(argv: list[str]):
    out = CliRunner().invoke(main, argv)
    assert out.exit_code in (0, 2), f"tlxdb {shlex.join(argv)}: {out.output}"
    return out


@pytest.mark.slow
def test_the_tutorials_cpu_commands_run_and_its_report_figures_render(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text = TUTORIAL.read_text()
    Path("add.py").write_text(blocks(text, "python")[0])

    made = cli(first_command(text, "tlxdb bundle new"))
    assert "PASS  baseline:verify" in made.stdout and Path("add-bundle/harness.py").is_file()

    run = cli([*first_command(text, "tlxdb optimize --kernel add.py"), *SMALLER])
    run_id = json.loads(run.stdout)["run_id"]
    report = first_command(text, "tlxdb report")
    assert report[1] == "RUN"
    written = cli([report[0], run_id, *report[2:]]).stdout.split()
    figures = sorted(Path(p).name for p in written if p.endswith(".svg"))
    assert figures == ["best_so_far.svg", "case_speedups.svg", "samples.svg"] or figures == [
        "best_so_far.svg",
        "samples.svg",
    ]  # fmt: skip  (no per-case figure when no candidate was promoted)

    for name in [*figures, "report.html"]:
        png = tmp_path / f"{name}.png"
        page = Path("add-report", name).resolve()
        assert page.is_file()
        width, height = (1200, 2000) if name == "report.html" else (900, 600)
        screenshot(page, png, width, height)
        size, ink, colours = drawn(png)
        assert size == (width, height)
        assert ink > 0.015 and colours > 30 and coloured(png) > 0.0001, (name, ink, colours)
