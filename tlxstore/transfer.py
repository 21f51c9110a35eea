"""Moving runs between stores (`tlxdb push` / `tlxdb pull`): a host's local store and the team
store, or any two stores. A copy is one ingest into the target, so it is all or nothing, and
idempotent by event id: copying again adds nothing, and a run that went on in the source after
its last copy adds only its new events (the target's gapless-sequence and conflict checks
apply as to any ingest)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pydantic import BaseModel, ConfigDict

from tlxstore.store import Store


class Transfer(BaseModel):
    """What a copy did."""

    model_config = ConfigDict(frozen=True)

    source: str
    target: str
    runs: list[str]
    events: int  # events of those runs in the source
    added: int  # events the target did not hold before


def copy_runs(
    source: Store, open_target: Callable[[], Store], refs: Sequence[str] = ()
) -> Transfer:
    """Copy runs (ids, unique prefixes or output folders; every run of the source when none is
    named) from `source` into the store `open_target` opens, in one transaction, then bring the
    target's views up to date. The target is opened (and created if need be) only once every
    run is read."""
    run_ids = [source.resolve_run(r) for r in refs] if refs else source.run_ids()
    envelopes = [e for run_id in dict.fromkeys(run_ids) for e in source.run_envelopes(run_id)]
    target = open_target()
    added = target.ingest(envelopes)
    target.project()
    return Transfer(
        source=source.location,
        target=target.location,
        runs=list(dict.fromkeys(run_ids)),
        events=len(envelopes),
        added=added,
    )
