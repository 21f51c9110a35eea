"""Helpers of the compatibility suite: copies of the bundles and kernels written here, and the
real CLI (click's CliRunner on `cli.main.main`)."""

from __future__ import annotations

import shutil
from pathlib import Path

from click.testing import CliRunner, Result

from cli.main import main

HERE = Path(__file__).resolve().parent
BUNDLES = HERE / "bundles"
KERNELS = HERE / "kernels"


def bundle(name: str, dest: Path, harness_append: str = "", cases: str | None = None) -> Path:
    root = Path(shutil.copytree(BUNDLES / name, dest / name))
    if harness_append:
        h = root / "harness.py"
        h.write_text(h.read_text() + harness_append)
    if cases is not None:
        (root / "cases.json").write_text(cases)
    return root


def kernel(name: str, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy(KERNELS / name, dest / name))


def invoke(args: list[str]) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
