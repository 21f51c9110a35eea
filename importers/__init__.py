"""Foreign and exported evidence into the store: tlxdb exports, tlxdb output folders and run logs,
and TLX agent output folders. Every kind becomes envelopes; all paths of one import are checked
first and then ingested in one transaction, so a failed import leaves nothing and importing the
same thing twice changes nothing."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from importers.tlx_agent import events_from_tlx_folder, is_tlx_folder
from tlxstore.errors import ImportFormatError
from tlxstore.events import Envelope
from tlxstore.export import MANIFEST, read_export
from tlxstore.runlog import LOG_NAME, read_envelopes
from tlxstore.store import Store


class SourceKind(StrEnum):
    EXPORT = "tlxdb export"
    OUTPUT_FOLDER = "tlxdb output folder"
    RUN_LOG = "tlxdb run log"
    TLX_AGENT = "TLX agent output folder"


class ImportedPath(BaseModel):
    model_config = ConfigDict(frozen=True)

    path: str
    kind: SourceKind
    runs: list[str]
    events: int


class ImportReport(BaseModel):
    model_config = ConfigDict(frozen=True)

    paths: list[ImportedPath]
    added: int  # events new to the store (0 when everything was there already)


def kind_of(path: Path) -> SourceKind:
    """What a path holds, or ImportFormatError naming what was expected."""
    if not path.exists():
        raise ImportFormatError(f"{path} does not exist")
    if path.is_dir():
        if (path / MANIFEST).is_file():
            return SourceKind.EXPORT
        if (path / LOG_NAME).is_file():
            return SourceKind.OUTPUT_FOLDER
    if is_tlx_folder(path):
        return SourceKind.TLX_AGENT
    if path.is_file() and path.suffix == ".jsonl":
        return SourceKind.RUN_LOG
    raise ImportFormatError(
        f"{path} is neither a tlxdb export ({MANIFEST}), a tlxdb output folder ({LOG_NAME}) "
        "nor a TLX agent output folder (experiments.json)"
    )


def read_path(
    path: Path, normalize: Callable[[str], str] | None = None
) -> tuple[SourceKind, list[Envelope]]:
    kind = kind_of(path)
    if kind is SourceKind.EXPORT:
        return kind, read_export(path)
    if kind is SourceKind.TLX_AGENT:
        return kind, events_from_tlx_folder(
            path, normalize
        ) if normalize else events_from_tlx_folder(path)
    return kind, read_envelopes(path)


def import_paths(
    store: Store, paths: Sequence[str | Path], normalize: Callable[[str], str] | None = None
) -> ImportReport:
    """Check every path, then ingest all their events in one transaction, and bring the
    store's projections up to date (the views show the import at once)."""
    if not paths:
        raise ImportFormatError("name at least one path to import")
    everything: list[Envelope] = []
    imported = []
    for p in paths:
        kind, envs = read_path(Path(p), normalize)
        everything.extend(envs)
        imported.append(
            ImportedPath(
                path=str(p), kind=kind, runs=sorted({e.run_id for e in envs}), events=len(envs)
            )
        )
    added = store.ingest(everything)
    store.project()
    return ImportReport(paths=imported, added=added)
