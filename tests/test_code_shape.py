"""No function of the library is longer than MAX_LINES lines: a longer one is split by case.

A function's length is the lines of its body (from its first statement to its last line,
docstring included), read with `ast` from every module of the library packages.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("tlxstore", "optimizer", "queries", "importers", "profilers", "cli")
MAX_LINES = 80


def long_functions(root: Path, packages: tuple[str, ...], limit: int) -> list[str]:
    """'path:line name (n lines)' for every function or method longer than `limit` body lines."""
    found = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    end = node.end_lineno or node.body[-1].lineno
                    n = end - node.body[0].lineno + 1
                    if n > limit:
                        rel = path.relative_to(root)
                        found.append(f"{rel}:{node.lineno} {node.name} ({n} lines)")
    return found


def test_no_library_function_is_longer_than_80_lines() -> None:
    too_long = long_functions(REPO, PACKAGES, MAX_LINES)
    assert not too_long, "split these by case:\n" + "\n".join(too_long)


def test_a_long_function_is_reported(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    short = "".join(f"    x{i} = {i}\n" for i in range(MAX_LINES))
    long = "".join(f"        x{i} = {i}\n" for i in range(MAX_LINES + 1))
    (tmp_path / "pkg" / "mod.py").write_text(
        f"def short():\n{short}\n\nclass C:\n    def long(self):\n{long}"
    )
    assert long_functions(tmp_path, ("pkg",), MAX_LINES) == ["pkg/mod.py:85 long (81 lines)"]
