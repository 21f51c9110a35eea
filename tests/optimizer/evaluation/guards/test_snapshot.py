"""Function snapshots: a replaced timer, comparison or harness function is named."""

from __future__ import annotations

import sys
import time
import types

import torch

from optimizer.evaluation.guards.snapshot import Snapshot, bundle_modules


def test_an_untouched_process_has_no_changes():
    assert Snapshot.take().changed() == []


def test_replacing_a_watched_function_is_named_and_restoring_it_clears_it(monkeypatch):
    snap = Snapshot.take()
    assert "time.perf_counter" in snap.entries and "torch.allclose" in snap.entries
    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)
    monkeypatch.setattr(torch, "allclose", lambda *a, **k: True)
    assert snap.changed() == ["time.perf_counter", "torch.allclose"]
    monkeypatch.undo()
    assert snap.changed() == []


def test_a_method_replaced_on_a_class_is_named(monkeypatch):
    snap = Snapshot.take()
    monkeypatch.setattr(torch.Tensor, "allclose", lambda *a, **k: True)
    assert snap.changed() == ["torch.Tensor.allclose"]


def _harness_module(tmp_path, monkeypatch):
    path = tmp_path / "bundle" / "harness.py"
    path.parent.mkdir()
    path.write_text("def verify(a, c):\n    return a == c\n")
    mod = types.ModuleType("harness_under_test")
    mod.__file__ = str(path)
    exec(compile(path.read_text(), str(path), "exec"), mod.__dict__)
    monkeypatch.setitem(sys.modules, "harness_under_test", mod)
    return mod


def test_a_harness_function_whose_code_was_swapped_is_named(tmp_path, monkeypatch):
    mod = _harness_module(tmp_path, monkeypatch)
    assert bundle_modules(tmp_path / "bundle") == [mod]
    snap = Snapshot.take(bundle_modules(tmp_path / "bundle"))
    assert "harness_under_test.verify" in snap.entries
    mod.verify.__code__ = (lambda a, c: True).__code__
    assert snap.changed() == ["harness_under_test.verify"]


def test_a_harness_function_rebound_in_its_module_is_named(tmp_path, monkeypatch):
    mod = _harness_module(tmp_path, monkeypatch)
    snap = Snapshot.take([mod])
    mod.verify = lambda a, c: True
    assert snap.changed() == ["harness_under_test.verify"]
