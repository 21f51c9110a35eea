"""The repository stands alone: every file a doc, a docstring or a test names is in it.

Scanned: the Python, Markdown, SQL, template and TOML files of the repository (and `.ci/run`).
A reference is
- any `docs/...` or `benchmarks/...` path: it must exist, from the repository root;
- any other path ending in `.md` (`tests/profilers/data/README.md`, `data/README.md`): it must
  exist from the root or from the folder of the file that names it;
- a bare Markdown name in capitals (`STORE.md`, `README.md`): some file of that name must exist.
  Bare lower-case names (`report.md`, `prompt.md`) are files tlxdb writes, not references;
- in any of those files (a docstring or comment of a `.py` file too), any path into the
  repository's own folders (`optimizer/run/loop.py`, `tests/tlxstore/`), also as `module.name`
  (`cli/options.open_store`): it must exist;
- never a path into the guidance folder outside the repository (`../shared`).

And docs/INTERFACES.md names every view of queries/views and every `tlxdb` command.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import queries
from cli.main import main

REPO = Path(__file__).resolve().parent.parent

_SUFFIXES = {".py", ".md", ".sql", ".j2", ".toml"}
_EXTRA_FILES = {Path(".ci/run")}
_SKIPPED_DIRS = {"__pycache__", "node_modules", "build", "dist"}
_OUTSIDE = ("../" + "shared", "/work/" + "shared")  # split so this file does not name them

_ROOTED = re.compile(r"(?<![\w./-])((?:docs|benchmarks)/[\w./-]*)")
_MARKDOWN = re.compile(r"(?<![\w./<>-])([\w./-]*\.md)(?!\.?\w)")
_CAPITALS = re.compile(r"[A-Z][A-Z0-9_]*\.md")
_PLACEHOLDER = set("{*<")
_OWN = re.compile(
    r"(?<![\w./-])((?:tlxstore|optimizer|queries|profilers|importers|cli|tests|examples)/[\w./-]*\w)"
)


def _scanned(root: Path) -> list[Path]:
    files = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(
            d
            for d in dirs
            if d not in _SKIPPED_DIRS
            and not d.endswith(".egg-info")
            and (not d.startswith(".") or d == ".ci")
        )
        for name in names:
            path = Path(folder) / name
            rel = path.relative_to(root)
            if path.suffix in _SUFFIXES or rel in _EXTRA_FILES:
                files.append(path)
    return files


def _exists(root: Path, ref: str) -> bool:
    """ref is a file or folder under root, or `module.name` of a module there."""
    if (root / ref).exists():
        return True
    module, _, name = ref.rpartition(".")
    return bool(module) and name.isidentifier() and (root / f"{module}.py").exists()


def broken_references(root: Path, skip: frozenset[Path] = frozenset()) -> list[str]:
    """'file:line: reason' for every reference under root to a file that is not there."""
    files = _scanned(root)
    names = {p.name for p in files if p.suffix == ".md"}
    problems = []
    for path in files:
        if path in skip:
            continue
        rel = path.relative_to(root)
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for lineno, line in enumerate(text.splitlines(), 1):
            where = f"{rel}:{lineno}"
            for outside in _OUTSIDE:
                if outside in line:
                    problems.append(f"{where}: cites {outside}, outside the repository")
            for m in _ROOTED.finditer(line):
                if line[m.end() : m.end() + 1] in _PLACEHOLDER:
                    continue  # a pattern (`results/store_bench.{json,md}`), not one path
                ref = m.group(1).rstrip(".")
                if not (root / ref).exists():
                    problems.append(f"{where}: {ref} does not exist")
            for m in _OWN.finditer(line):
                if line[m.end() : m.end() + 1] in _PLACEHOLDER:
                    continue
                if not _exists(root, m.group(1)):
                    problems.append(f"{where}: {m.group(1)} does not exist")
            for m in _MARKDOWN.finditer(line):
                ref = m.group(1)
                if ref.startswith(("docs/", "benchmarks/")):
                    continue  # checked above
                if "/" in ref:
                    if not ((root / ref).exists() or (path.parent / ref).exists()):
                        problems.append(f"{where}: {ref} does not exist")
                elif _CAPITALS.fullmatch(ref) and ref not in names:
                    problems.append(f"{where}: no {ref} in the repository")
    return problems


def test_every_referenced_file_is_in_the_repository() -> None:
    problems = broken_references(REPO, skip=frozenset({Path(__file__).resolve()}))
    assert not problems, "\n".join(problems)


def test_a_missing_file_or_a_path_outside_is_reported(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "STORE.md").write_text("# the store\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "data").mkdir()
    (tmp_path / "pkg" / "data" / "README.md").write_text("fixtures\n")
    (tmp_path / "pkg" / "mod.py").write_text(
        '"""See docs/STORE.md, STORE.md and data/README.md; writes report.md and prompt.md.\n\n'
        "The contract is docs/CONTRACT.md §1; numbers in FACTS.md and ../" + "shared/DESIGN.md;\n"
        "results in benchmarks/results/run.json, or benchmarks/results/store_bench.{json,md}.\n"
        "Tested by tests/pkg/test_mod.py, built by optimizer/run/loop.plan.\n"
        '"""\n'
    )
    (tmp_path / "optimizer" / "run").mkdir(parents=True)
    (tmp_path / "optimizer" / "run" / "loop.py").write_text("def plan(): pass\n")
    (tmp_path / "docs" / "LOOP.md").write_text(
        "`optimizer/run/loop.py`, `optimizer/run/loop.plan`, `optimizer/loop.py`\n"
    )
    problems = broken_references(tmp_path)
    assert problems == [
        "docs/LOOP.md:1: optimizer/loop.py does not exist",
        "pkg/mod.py:3: cites ../shared, outside the repository",
        "pkg/mod.py:3: docs/CONTRACT.md does not exist",
        "pkg/mod.py:3: no FACTS.md in the repository",
        "pkg/mod.py:3: ../shared/DESIGN.md does not exist",
        "pkg/mod.py:4: benchmarks/results/run.json does not exist",
        "pkg/mod.py:5: tests/pkg/test_mod.py does not exist",
    ]


def test_the_interfaces_page_names_every_view_and_every_command() -> None:
    words = set(re.findall(r"[\w-]+", (REPO / "docs" / "INTERFACES.md").read_text()))
    missing = [n for n in (*queries.names(), *main.commands) if n not in words]
    assert not missing, f"docs/INTERFACES.md names no {missing}"
