"""Importing TLX agent output folders, tlxdb output folders and exports: idempotent, all or nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import importers
from importers.tlx_agent import events_from_tlx_folder
from optimizer.decision.identity import normalized_source, source_hashes
from tlxstore.errors import EventConflictError, ImportFormatError, LogCorruptError
from tlxstore.events import Outcome, Phase
from tlxstore.export import export_runs
from tlxstore.fold import fold
from tlxstore.runlog import RunLog
from tlxstore.store import Store
from tlxstore.testing import small_run

TLX_RUN = Path(__file__).parent / "fixtures" / "tlx_run"


def test_a_tlx_agent_folder_folds_into_candidates_samples_and_decisions():
    state = fold(events_from_tlx_folder(TLX_RUN, normalized_source))
    assert list(state.candidates) == ["baseline", "r001-c000", "r001-c001", "r002-c000"]
    won = state.candidates["r001-c000"]
    assert won.proposal.hypothesis == "Larger blocks amortize the loop"
    assert won.proposal.change == "BLOCK 256 -> 1024"
    assert won.decision is not None and won.decision.outcome == Outcome.PROMOTED
    assert won.decision.speedup == 1.25
    assert won.samples_by_case() == {"small": [8.0, 8.1, 8.05], "large": [80.0, 80.5, 80.2]}
    assert state.candidates["baseline"].samples[0].phase == Phase.VALIDATION
    failed = state.candidates["r002-c000"]
    assert failed.decision is not None and failed.decision.outcome == Outcome.FAILED
    assert "TimeoutError" in failed.decision.reason and failed.samples == []
    assert state.finished is not None and state.finished.winner_id == "r001-c000"


def test_tlx_sources_get_tlxdb_hashes_so_dedup_sees_them():
    state = fold(events_from_tlx_folder(TLX_RUN, normalized_source))
    text = (TLX_RUN / "experiments" / "r001-c000" / "kernel.py").read_text()
    proposal = state.candidates["r001-c000"].proposal
    assert (proposal.source_hash, proposal.normalized_hash) == source_hashes(text)
    assert state.sources[source_hashes(text)[0]].text == text


def test_importing_a_tlx_folder_twice_or_a_copy_of_it_changes_nothing(store_path, tmp_path):
    store = Store(store_path)
    first = importers.import_paths(store, [TLX_RUN], normalize=normalized_source)
    assert first.added > 0 and first.paths[0].kind == importers.SourceKind.TLX_AGENT
    copy = shutil.copytree(TLX_RUN, tmp_path / "copied")
    assert importers.import_paths(store, [TLX_RUN, copy], normalize=normalized_source).added == 0


def test_output_folders_logs_and_exports_import_idempotently(store_path, tmp_path):
    RunLog.create(tmp_path / "out", "r1").append(small_run(2))
    source = Store(tmp_path / "source.duckdb")
    RunLog.create(tmp_path / "out2", "r2").append(small_run(1))
    source.ingest_log(tmp_path / "out2")
    export_runs(source, ["r2"], tmp_path / "exp")
    store = Store(store_path)
    report = importers.import_paths(
        store, [tmp_path / "out", tmp_path / "exp", tmp_path / "out2" / "events.jsonl"]
    )
    assert [p.kind for p in report.paths] == [
        importers.SourceKind.OUTPUT_FOLDER,
        importers.SourceKind.EXPORT,
        importers.SourceKind.RUN_LOG,
    ]
    assert report.added == len(small_run(2)) + len(small_run(1))
    assert importers.import_paths(store, [tmp_path / "exp", tmp_path / "out"]).added == 0


def test_one_bad_path_imports_nothing_of_the_others(store_path, tmp_path):
    RunLog.create(tmp_path / "good", "r1").append(small_run(1))
    RunLog.create(tmp_path / "bad", "r2").append(small_run(1))
    log = tmp_path / "bad" / "events.jsonl"
    lines = log.read_text().splitlines(keepends=True)
    lines[2] = "garbage\n"
    log.write_text("".join(lines))
    store = Store(store_path)
    with pytest.raises(LogCorruptError, match="line 3"):
        importers.import_paths(store, [tmp_path / "good", tmp_path / "bad"])
    assert store.run_ids() == []


def test_an_altered_copy_of_an_imported_run_is_a_conflict_and_harms_nothing(store_path, tmp_path):
    RunLog.create(tmp_path / "out", "r1").append(small_run(1))
    store = Store(store_path)
    importers.import_paths(store, [tmp_path / "out"])
    before = store.run_envelopes("r1")
    log = tmp_path / "out" / "events.jsonl"
    log.write_text(log.read_text().replace('"hypothesis of c001"', '"a rewritten story"'))
    with pytest.raises(EventConflictError, match="different body"):
        importers.import_paths(store, [tmp_path / "out"])
    assert store.run_envelopes("r1") == before


def _write(path: Path, text: str) -> None:
    path.mkdir()
    (path / "experiments.json").write_text(text)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p.mkdir(), "is neither a tlxdb export"),
        (lambda p: None, "does not exist"),
        (lambda p: _write(p, "{not json"), "not readable JSON"),
        (lambda p: _write(p, "[]"), "non-empty list"),
        (lambda p: _write(p, '[{"experiment_id": "../../etc"}]'), "no usable experiment_id"),
        (
            lambda p: _write(p, '[{"experiment_id": "a", "status": "great"}]'),
            "unknown status 'great'",
        ),
    ],
)
def test_unimportable_paths_are_refused_with_a_reason(store_path, tmp_path, make, message):
    target = tmp_path / "thing"
    make(target)
    with pytest.raises(ImportFormatError, match=message):
        importers.import_paths(Store(store_path), [target])
