"""File hashes of the protected paths: any change, addition or deletion is reported."""

from __future__ import annotations

from optimizer.evaluation.guards.files import MISSING, changed_paths, hash_paths


def test_unchanged_files_report_nothing(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "harness.py").write_text("x")
    paths = [tmp_path / "b", tmp_path / "kernel.py"]
    (tmp_path / "kernel.py").write_text("k")
    assert changed_paths(hash_paths(paths), hash_paths(paths)) == []


def test_an_edit_an_added_file_and_a_deletion_are_each_reported(tmp_path):
    bundle = tmp_path / "b"
    bundle.mkdir()
    (bundle / "harness.py").write_text("x")
    (bundle / "cases.json").write_text("[]")
    kernel = tmp_path / "kernel.py"
    kernel.write_text("k")
    before = hash_paths([bundle, kernel])
    (bundle / "cases.json").write_text("[{}]")
    (bundle / "sneaky.py").write_text("")
    kernel.unlink()
    after = hash_paths([bundle, kernel])
    assert after[str(kernel)] == MISSING
    assert changed_paths(before, after) == sorted(
        [str(bundle / "cases.json"), str(bundle / "sneaky.py"), str(kernel)]
    )


def test_python_bytecode_caches_are_not_protected_files(tmp_path):
    bundle = tmp_path / "b"
    bundle.mkdir()
    before = hash_paths([bundle])
    (bundle / "__pycache__").mkdir()
    (bundle / "__pycache__" / "harness.cpython-311.pyc").write_bytes(b"\0")
    assert changed_paths(before, hash_paths([bundle])) == []
