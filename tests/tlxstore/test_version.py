"""tlxdb's version names the code that ran: a digest of its own source files."""

from __future__ import annotations

import re
from pathlib import Path

from optimizer.run.lifecycle import tool_versions
from tlxstore.version import source_digest, tlxdb_version

REPO = Path(__file__).resolve().parents[2]


def _tree(root: Path) -> Path:
    (root / "tlxstore" / "sql").mkdir(parents=True)
    (root / "tlxstore" / "store.py").write_text("x = 1\n")
    (root / "tlxstore" / "sql" / "views.sql").write_text("SELECT 1;\n")
    return root


def test_the_digest_changes_with_any_source_file_and_only_with_source_files(tmp_path):
    root = _tree(tmp_path)
    first = source_digest(root, ("tlxstore",))
    assert re.fullmatch(r"[0-9a-f]{12}", first)
    (root / "tlxstore" / "__pycache__").mkdir()
    (root / "tlxstore" / "__pycache__" / "store.cpython-311.pyc").write_bytes(b"\x00compiled")
    (root / "tlxstore" / "notes.txt").write_text("not source")
    assert source_digest(root, ("tlxstore",)) == first
    (root / "tlxstore" / "sql" / "views.sql").write_text("SELECT 2;\n")
    second = source_digest(root, ("tlxstore",))
    assert second != first
    (root / "tlxstore" / "sql" / "views.sql").rename(root / "tlxstore" / "sql" / "other.sql")
    assert source_digest(root, ("tlxstore",)) not in (first, second)  # a rename counts too


def test_a_run_records_the_version_with_this_trees_digest():
    version = tlxdb_version()
    number, digest = version.split("+src.")
    assert number and digest == source_digest(REPO)
    assert tool_versions().tlxdb == version  # RunStarted.tool_versions
