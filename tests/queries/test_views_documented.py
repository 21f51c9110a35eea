"""docs/STORE.md ("The views") lists every view with its columns; each list is checked here
against the view's real columns on an empty store, so the documentation cannot drift."""

from __future__ import annotations

import re
from pathlib import Path

import queries
from tlxstore.store import Store

DOC = Path(__file__).resolve().parents[2] / "docs" / "STORE.md"


def documented() -> dict[str, list[str]]:
    """view -> its columns, from the table under "## The views" (a note in parentheses after a
    column, as in `outcome (pass/warn/fail)`, is not part of its name)."""
    section = DOC.read_text().split("\n## The views\n", 1)[1].split("\n### ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \| ([^|]+) \|", section, re.M)
    return {
        name: [re.sub(r"\s*\(.*?\)", "", c).strip() for c in cols.split(",")] for name, cols in rows
    }


def test_every_view_is_documented_with_exactly_its_columns(tmp_path):
    store = Store(tmp_path / "empty.duckdb")
    docs = documented()
    assert sorted(docs) == sorted(queries.names())
    for name, columns in docs.items():
        real = queries.query(store, f'SELECT * FROM "{name}" LIMIT 0').column_names
        assert columns == real, f"docs/STORE.md lists for {name}: {columns}; the view has {real}"
