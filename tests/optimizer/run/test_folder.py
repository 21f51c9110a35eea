"""Files tlxdb writes into an output folder or a report folder: whole (one rename), secrets
masked, and with the permissions the umask gives any new file, as a shell's redirect would."""

from __future__ import annotations

import os
import stat

import pytest

from optimizer.atomic import write_atomic


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_a_new_file_gets_the_umasks_permissions_and_no_temporary_file_is_left(tmp_path, umask):
    old = os.umask(umask)
    try:
        write_atomic(tmp_path / "reports" / "report.html", "<html></html>")
    finally:
        os.umask(old)
    path = tmp_path / "reports" / "report.html"
    assert path.read_text() == "<html></html>"
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask
    assert [p.name for p in path.parent.iterdir()] == ["report.html"]


def test_rewriting_a_file_replaces_it_whole_and_masks_a_secret(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789abcdef")
    path = tmp_path / "result.json"
    write_atomic(path, "first")
    write_atomic(path, "key sk-test-0123456789abcdef here")
    text = path.read_text()
    assert "sk-test-0123456789abcdef" not in text and text.startswith("key ")
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]
