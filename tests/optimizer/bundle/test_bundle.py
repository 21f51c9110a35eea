import json
import shutil
from pathlib import Path

import pytest

from optimizer.bundle import loading as b
from optimizer.evaluation.requests import HarnessBundle

FIXTURES = Path(__file__).resolve().parent.parent.parent / "fixtures"


@pytest.fixture
def bundle_dir(tmp_path: Path) -> Path:
    return Path(shutil.copytree(FIXTURES / "vecadd_bundle", tmp_path / "bundle"))


def _write(path: Path, value) -> None:
    path.write_text(json.dumps(value))


def _error(bundle_dir: Path) -> str:
    with pytest.raises(b.BundleError) as exc:
        b.load(b.locate(bundle_dir))
    return str(exc.value)


def test_a_tlx_bundle_folder_loads_with_its_cases_and_target(bundle_dir):
    loaded = b.load(b.locate(bundle_dir))
    assert [c.case_id for c in loaded.cases] == ["n2048", "n1000"]
    assert loaded.weights == {"n2048": 1.0, "n1000": 0.5}
    assert loaded.target.backend == "cpu"
    assert loaded.target.environment == {"TRITON_INTERPRET": "1"}


def test_explicit_files_load_like_a_folder(bundle_dir):
    loaded = b.load(
        b.locate(
            harness=bundle_dir / "harness.py",
            cases=bundle_dir / "cases.json",
            target=bundle_dir / "target.json",
        )
    )
    assert loaded.paths.root is None
    assert len(loaded.cases) == 2


def test_unknown_target_keys_are_kept_and_ignored(bundle_dir):
    target = json.loads((bundle_dir / "target.json").read_text())
    target["team_notes"] = {"owner": "me"}
    _write(bundle_dir / "target.json", target)
    assert b.load(b.locate(bundle_dir)).raw_target["team_notes"] == {"owner": "me"}


def test_cases_that_are_not_a_list_are_refused(bundle_dir):
    _write(bundle_dir / "cases.json", {"case_id": "a"})
    assert _error(bundle_dir) == "cases.json: must be a list of cases, got a JSON dict"


def test_duplicate_case_ids_are_refused(bundle_dir):
    _write(bundle_dir / "cases.json", [{"case_id": "a"}, {"case_id": "a"}])
    assert _error(bundle_dir) == "cases.json: [1].case_id: duplicate case_id 'a'"


def test_an_empty_case_id_is_refused(bundle_dir):
    _write(bundle_dir / "cases.json", [{"case_id": "a"}, {"case_id": " "}])
    assert _error(bundle_dir) == 'cases.json: [1].case_id: value error, must not be blank (got " ")'


def test_a_weight_of_zero_or_less_is_refused(bundle_dir):
    _write(bundle_dir / "cases.json", [{"case_id": "a", "weight": 0}])
    assert _error(bundle_dir) == "cases.json: [0].weight: input should be greater than 0 (got 0)"


def test_an_unknown_backend_is_refused(bundle_dir):
    _write(bundle_dir / "target.json", {"backend": "tpu"})
    assert (
        _error(bundle_dir)
        == "target.json: backend: input should be 'cuda', 'hip' or 'cpu' (got \"tpu\")"
    )


def test_a_non_positive_budget_value_is_refused(bundle_dir):
    _write(bundle_dir / "budget.json", {"max_rounds": 0})
    assert _error(bundle_dir) == "budget.json: max_rounds: input should be greater than 0 (got 0)"


def test_a_min_speedup_below_one_is_refused(bundle_dir):
    _write(bundle_dir / "budget.json", {"min_speedup": 0.9})
    assert (
        _error(bundle_dir)
        == "budget.json: min_speedup: input should be greater than or equal to 1 (got 0.9)"
    )


def test_invalid_json_names_the_file_and_position(bundle_dir):
    (bundle_dir / "cases.json").write_text('[{"case_id": "a",]')
    assert _error(bundle_dir).startswith("cases.json: not valid JSON: ")


def test_a_missing_file_is_named(bundle_dir):
    (bundle_dir / "target.json").unlink()
    with pytest.raises(b.BundleError, match=r"^target.json not found at .*target.json$"):
        b.locate(bundle_dir)


def test_an_unreadable_file_is_named(bundle_dir):
    (bundle_dir / "cases.json").write_bytes(b"\xff\xfe\x00garbage")
    assert _error(bundle_dir).startswith("cannot read cases.json at ")


def test_bundle_and_explicit_files_together_are_refused(bundle_dir):
    with pytest.raises(b.BundleError, match="give either --bundle or --harness, not both"):
        b.locate(bundle_dir, harness=bundle_dir / "harness.py")


def test_missing_explicit_files_are_named(bundle_dir):
    with pytest.raises(
        b.BundleError, match=r"^missing --cases, --target \(or pass --bundle DIR\)$"
    ):
        b.locate(harness=bundle_dir / "harness.py")


def test_a_kernel_with_a_syntax_error_is_refused(tmp_path):
    k = tmp_path / "k.py"
    k.write_text("def f(:\n    pass\n")
    with pytest.raises(b.BundleError, match=r"^kernel k.py has a syntax error at line 1: "):
        b.read_kernel(k)


def test_a_budget_file_given_with_budget_overrides_the_flags(bundle_dir, tmp_path):
    _write(tmp_path / "mine.json", {"max_rounds": 7, "min_speedup": 1.05})
    paths = b.locate(bundle_dir, budget=tmp_path / "mine.json")
    assert paths.budget_explicit
    t = b.resolve_thresholds(
        {"max_rounds": 3, "max_cv": 0.2}, b.load(paths).budget, budget_wins=paths.budget_explicit
    )
    assert (t.max_rounds, t.min_speedup, t.max_cv, t.candidates_per_round) == (7, 1.05, 0.2, 2)


def test_the_flags_override_a_budget_json_found_in_the_bundle_folder(bundle_dir):
    _write(bundle_dir / "budget.json", {"max_rounds": 7, "min_speedup": 1.05})
    paths = b.locate(bundle_dir)
    assert paths.budget == bundle_dir.resolve() / "budget.json" and not paths.budget_explicit
    t = b.resolve_thresholds(
        {"max_rounds": 3, "max_cv": 0.2}, b.load(paths).budget, budget_wins=paths.budget_explicit
    )
    # the flags typed win; budget.json still wins over the defaults
    assert (t.max_rounds, t.min_speedup, t.max_cv, t.candidates_per_round) == (3, 1.05, 0.2, 2)


def test_a_bad_flag_value_names_the_flag():
    with pytest.raises(b.BundleError, match=r"^--min-speedup must be at least 1 \(got 0.5\)$"):
        b.resolve_thresholds({"min_speedup": 0.5}, None, budget_wins=True)


def _freeze(bundle_dir: Path, tmp_path: Path) -> b.FrozenBundle:
    tmp_path.mkdir(parents=True, exist_ok=True)
    kernel = tmp_path / "kernel.py"
    shutil.copyfile(FIXTURES / "vecadd_kernel.py", kernel)
    return b.FrozenBundle(b.load(b.locate(bundle_dir)), kernel, tmp_path / "ws" / "bundle")


def test_freezing_makes_a_read_only_private_copy_with_every_file_hashed(bundle_dir, tmp_path):
    frozen = _freeze(bundle_dir, tmp_path)
    assert set(frozen.files) == {"harness.py", "cases.json", "target.json"}
    assert all(v.startswith("sha256:") for v in frozen.files.values())
    copy = frozen.root / "harness.py"
    assert copy.read_text() == (bundle_dir / "harness.py").read_text()
    assert not copy.stat().st_mode & 0o222
    assert HarnessBundle.of(frozen).environment == {"TRITON_INTERPRET": "1"}
    frozen.check()


def test_a_changed_original_is_a_live_change_and_the_copy_still_checks(bundle_dir, tmp_path):
    frozen = _freeze(bundle_dir, tmp_path)
    assert frozen.live_changes() == []
    (bundle_dir / "cases.json").write_text('[{"case_id": "only"}]')
    frozen.check()  # the run measures its copy, which did not change
    assert frozen.live_changes() == [(bundle_dir.resolve() / "cases.json", "cases.json")]


def test_a_changed_private_copy_stops_the_run(bundle_dir, tmp_path):
    frozen = _freeze(bundle_dir, tmp_path)
    copy = frozen.root / "harness.py"
    copy.chmod(0o644)
    copy.write_text(copy.read_text() + "\n# edited\n")
    with pytest.raises(b.BundleChangedError, match=r"^the private copy of harness.py changed"):
        frozen.check()


def test_budget_json_is_frozen_but_not_part_of_the_bundle_identity(bundle_dir, tmp_path):
    first = _freeze(bundle_dir, tmp_path / "a")
    _write(bundle_dir / "budget.json", {"max_rounds": 2})
    second = _freeze(bundle_dir, tmp_path / "b")
    assert "budget.json" in second.files
    assert first.bundle_digest == second.bundle_digest
    (bundle_dir / "harness.py").write_text((bundle_dir / "harness.py").read_text() + "\n")
    third = _freeze(bundle_dir, tmp_path / "c")
    assert third.bundle_digest != first.bundle_digest


def test_an_edited_kernel_is_a_live_change_and_not_a_protected_path(bundle_dir, tmp_path):
    frozen = _freeze(bundle_dir, tmp_path)
    assert frozen.kernel_path not in HarnessBundle.of(frozen).protected_paths
    frozen.kernel_path.write_text("# edited by the user\n")
    assert frozen.live_changes() == [(frozen.kernel_path, "the kernel kernel.py")]
    # against the hash a resumed run started from, not the one read when it froze again
    edited = b.FrozenBundle(frozen.bundle, frozen.kernel_path, tmp_path / "ws2" / "bundle")
    assert edited.live_changes() == []
    assert edited.live_changes(frozen.kernel_sha256) == [
        (frozen.kernel_path, "the kernel kernel.py")
    ]
