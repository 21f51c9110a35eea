"""`--provider remeasure --remeasure-run RUN`: re-propose a recorded run's candidates, in order,
with their recorded metadata and no model, so history can be re-measured on another GPU or
Triton. `--provider remeasure` without `--remeasure-run`: re-propose the kernel's best-known
configurations under other identities (ctx.nearest, the view nearest_history: other runs' promoted sources of
this same kernel source, nearest first), so a Triton upgrade or a new GPU is one command.

Invariants:
- The recorded run is read through the store (Store.resolve_run, run_envelopes) and folded with
  tlxstore.fold.fold: exactly the state the recorded run had.
- Every candidate of the recorded run except the baseline is re-proposed once, in proposal
  order, with its complete recorded source (whatever the new run's parent is) and
  `remeasures = "<run_id>/<candidate_id>"`. A source proposed twice in the recorded run is
  re-measured once.
- It measures on purpose: the loop must not treat a proposal with `remeasures` set as a
  duplicate of what it re-measures.
- On resume, candidates whose source this run has already measured are skipped.
- After the last one: SearchExhausted.
- Formerly the `replay` provider (`--replay-run`); the registry still takes that name
  (optimizer.providers.RENAMED) and the CLI says it was renamed.
- Without a recorded run: each source of ctx.nearest whose run measured this same kernel source
  (same_source) and that this run's identity has not measured is re-proposed once, nearest first,
  with its stored text, its recorded knobs and `remeasures` naming where it was promoted; then
  SearchExhausted.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from optimizer.providers.base import (
    Proposal,
    ProviderContext,
    ProviderError,
    Recorder,
    SearchExhausted,
)
from optimizer.providers.support import parse_options
from tlxstore.config import StoreRef
from tlxstore.events import Hypothesis
from tlxstore.fold import fold


class RemeasureOptions(BaseModel):
    """Options of the remeasure provider. Unknown keys (other providers' options) are ignored."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    # a run id, a unique prefix, or an output folder; None: the kernel's nearest history
    remeasure_run: str | None = Field(default=None, min_length=1)
    store: StoreRef


class RemeasureProvider:
    name = "remeasure"
    model: str | None = None

    def __init__(
        self,
        run_id: str | None,
        recorded: list[tuple[str, Proposal]],
        store: StoreRef | None = None,
    ) -> None:
        self.run_id = run_id  # None: the nearest history instead of one run
        self.recorded = recorded  # (recorded source_hash, proposal), in proposal order
        self.store = store  # where the nearest history's sources are read
        self._next = 0
        self._proposed: set[str] = set()  # sources of the nearest history proposed

    @classmethod
    def from_store(cls, store_path: StoreRef, run_ref: str) -> RemeasureProvider:
        """Load the recorded candidates of run_ref (raises UnknownRunError for a bad reference)."""
        from tlxstore.location import open_store  # the store is only needed for this provider

        store = open_store(store_path)
        run_id = store.resolve_run(run_ref)
        state = fold(store.run_envelopes(run_id))
        proposals: list[tuple[str, Proposal]] = []
        seen: set[str] = set()
        for cand in state.candidates.values():
            p = cand.proposal
            if p.parent_id is None or p.round == 0 or p.source_hash in seen:
                continue  # the baseline is measured by the new run itself
            stored = state.sources.get(p.source_hash)
            if stored is None:
                raise ProviderError(
                    f"run {run_id} has no stored source for candidate {p.candidate_id}"
                )
            seen.add(p.source_hash)
            proposals.append(
                (
                    p.source_hash,
                    Proposal(
                        source=stored.text,
                        **p.model_dump(include=set(Hypothesis.model_fields)),
                        knobs=p.knobs,
                        remeasures=f"{run_id}/{p.candidate_id}",
                    ),
                )
            )
        return cls(run_id, proposals)

    def propose(self, ctx: ProviderContext, record: Recorder) -> Proposal | SearchExhausted:
        """The next recorded candidate this run has not measured yet."""
        if self.run_id is None:
            return self._nearest(ctx)
        measured_here = {m.source_hash for m in ctx.measured if m.run_id == ctx.run_id}
        while self._next < len(self.recorded):
            recorded_hash, proposal = self.recorded[self._next]
            self._next += 1
            if recorded_hash in measured_here:
                continue  # resumed run: already re-measured before the interruption
            return proposal
        return SearchExhausted(
            reason=f"re-measured all {len(self.recorded)} candidates of run {self.run_id}"
        )

    def _nearest(self, ctx: ProviderContext) -> Proposal | SearchExhausted:
        """The next source of the nearest history, measured for this same kernel source under
        another identity, that this identity has not measured."""
        measured = {m.source_hash for m in ctx.measured}
        for near in ctx.nearest:
            h = near.source_hash
            if not near.same_source or h in measured or h in self._proposed:
                continue
            self._proposed.add(h)
            return Proposal(
                source=self._source(h),
                hypothesis=(
                    f"Re-measure run {near.from_run_id}'s {near.from_candidate_id} on this "
                    "device and these versions"
                ),
                evidence=(
                    f"nearest history #{near.rank}: promoted in run {near.from_run_id}, "
                    f"{near.from_candidate_id}, at {near.speedup:.3g}x its baseline there "
                    f"({near.differs})"
                ),
                change="the same source, measured again here",
                knobs=near.knobs,
                remeasures=f"{near.from_run_id}/{near.from_candidate_id}",
            )
        return SearchExhausted(
            reason=f"re-measured the {len(self._proposed)} best-known configurations of this "
            "kernel's nearest history that this identity had not measured"
        )

    def _source(self, source_hash: str) -> str:
        from tlxstore.location import open_store  # the store is only needed for this provider

        assert self.store is not None
        rows = open_store(self.store).query(
            "SELECT text FROM proj_sources WHERE source_hash = $h", {"h": source_hash}
        )
        if not rows.num_rows:
            raise ProviderError(f"the store holds no source {source_hash}")
        return str(rows.column("text")[0].as_py())


def create(options: Any) -> RemeasureProvider:
    """The remeasure provider from ProviderOptions or a mapping (keys: remeasure_run, store)."""
    opts = parse_options(
        RemeasureOptions,
        options,
        "remeasure",
        {"remeasure_run": "--remeasure-run RUN", "store": "--store PATH"},
    )
    if opts.remeasure_run is None:
        return RemeasureProvider(None, [], opts.store)
    return RemeasureProvider.from_store(opts.store, opts.remeasure_run)
