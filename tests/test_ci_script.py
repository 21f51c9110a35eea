"""`.ci/run` runs what README.md tells a developer to run: the lint and type checks of its
Development line, then its test command, each verbatim; and mypy checks every package we ship."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text()
CI = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()]


def _readme_commands() -> tuple[str, str, str]:
    """README's lint, types and test commands, as written there."""
    [test] = re.findall(r"Run the tests:\n\n```\n(.*?)\n```", README)
    development = " ".join(README[README.index("Development:") :].split("\n\n")[0].split())
    lint, types = re.findall(r"`([^`]+)` \((?:lint|types)\)", development)
    return lint, types, test


def test_ci_runs_readmes_lint_and_type_checks_then_its_test_command_verbatim():
    lint, types, test = _readme_commands()
    assert "ruff check" in lint and "ruff format --check" in lint and "mypy" in types
    assert "set -euo pipefail" in CI  # the first failing command fails the run
    assert CI.index(lint) < CI.index(test) and CI.index(types) < CI.index(test)
    assert CI[-1] == test


def test_mypy_checks_every_package_we_ship():
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    shipped = {p.rstrip("*") for p in config["tool"]["setuptools"]["packages"]["find"]["include"]}
    assert shipped == set(config["tool"]["mypy"]["packages"])
