"""The `tune` provider: no model; a pattern search over the kernel's launch and compile knobs.

The strategy (docs/TUNE.md has the long form):
- Knobs come from the parent's source (optimizer.providers.knobs); their domains from the target's declared
  `tuning_space` or, failing that, from their role (block sizes: powers of two; warps and stages:
  what the backend accepts). The interpreter ignores warps and stages, so on the cpu backend only
  constexpr knobs are searched.
- The evidence is every measured candidate of this kernel under this measurement identity, in any
  run (ctx.measured). A measured entry counts as a configuration of *this* kernel only when
  rendering that configuration onto the parent (or the original) gives exactly its source hash.
- A configuration measured more than once (in this run or others) is one point: its score is the
  pooled estimate of its measurements (optimizer/decision/pooling.py), never the best of them.
- The center is the best measured configuration. Once per run, before searching, the run
  re-adopts the best known configuration by pooled estimate when a prior run promoted it and this
  run has not measured it, as a re-measurement of that candidate (re-measured against this run's
  baseline, not answered from the store), so a second run starts where the first ended. A
  configuration whose pooled estimate is below another known one's is never that start.
- Moves are per-knob steps in log2 (domain-index) space from the center: the first step in a
  direction is half the room left that way; a step in the direction that just improved doubles
  (the search accelerates); a direction with a worse point ahead bisects toward it; a direction
  whose neighbour is worse or failed is closed. When every single-knob move is closed, pairs of
  knobs move together by one step. Moves are ranked by what the evidence says helped (a direction
  that improved before first), then unexplored directions, then refinements.
- A configuration already measured for this kernel, bundle and hardware (any run), one that
  breaks a constraint (power of two, limits on blocks and warps, shared memory, registers), or
  one already proposed in this run is never proposed. When no move is left the provider returns
  SearchExhausted with the reason.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from optimizer.bundle.spec import CaseSpec, TargetSpec
from optimizer.decision.identity import raw_source_hash
from optimizer.decision.pooling import Z_99, Estimate, Measured, Measurement, log_se, pool_by
from optimizer.evaluation.launches import dominant_first, observed_values
from optimizer.providers import ProviderOptions, roofline_order
from optimizer.providers.base import (
    MeasuredCandidate,
    Proposal,
    ProviderContext,
    ProviderError,
    Recorder,
    SearchExhausted,
)
from optimizer.providers.knobs import (
    DEFAULT_NUM_STAGES,
    DEFAULT_NUM_WARPS,
    KernelInfo,
    Knob,
    KnobError,
    KnobRole,
    KnobSpace,
    Observed,
    apply_knobs,
    computed_values,
    config_signature,
    find_knobs,
    parse_signature,
    pin_autotune,
)
from tlxstore.events import BASELINE_ID, HypothesisKind, KnobsUnreadable, StoppingReason

# Hardware limits the search respects. Shared memory per block (bytes) by compute capability.
_SMEM_BYTES_BY_ARCH = {
    "sm_90": 232448,
    "sm_100": 232448,
    "sm_89": 101376,
    "sm_86": 101376,
    "sm_80": 166912,
}
_DEFAULT_SMEM_BYTES = 101376
_MAX_TENSOR_NUMEL = 1 << 20  # Triton's limit on the elements of one block tensor
_MAX_BLOCK = 1 << 14  # a 1-D block beyond 16K elements per program does not pay
_MIN_BLOCK = 16
# Values of one block tensor per thread. A tl.dot accumulator beyond 128 fp32 values spills; a
# 1-D row block beyond 64 loses bandwidth (docs/MEASUREMENTS.md, H200 softmax: 64/thread 4.0 TB/s, 128/thread
# 3.3, 256/thread 2.5), so those configurations are not worth an evaluation.
_MAX_ACC_VALUES_PER_THREAD = 128
_MAX_ROW_VALUES_PER_THREAD = 64
_WARPS = {"cuda": [1, 2, 4, 8, 16, 32], "hip": [1, 2, 4, 8, 16], "cpu": [1, 2, 4, 8, 16, 32]}
_STAGES = [1, 2, 3, 4, 5]
_HURT = math.log(
    0.9
)  # a move measured >10% slower elsewhere is tried only when nothing else is left
_ROLE_ORDER = {KnobRole.BLOCK: 0, KnobRole.WARPS: 1, KnobRole.STAGES: 2, KnobRole.INTEGER: 3}

Config = dict[str, int]


def _key(config: Config) -> str:
    return config_signature(config)


@dataclass(frozen=True)
class _Point:
    config: Config
    score: float | None  # log(pooled speedup vs baseline); None: failed
    run_id: str  # where it was first measured
    candidate_id: str
    order: int = -1  # position in the measured history (-1: the baseline, measured first)
    estimate: Estimate | None = None  # what the score pools (None: the baseline, or failed)
    members: frozenset[tuple[str, str]] = frozenset()  # (run, candidate) of each decided entry

    @property
    def runs(self) -> set[str]:
        return {run for run, _ in self.members}


@dataclass(frozen=True)
class _Move:
    config: Config
    rank: tuple
    evidence: str


@dataclass(frozen=True)
class _Rewriter:
    """The knob model (optimizer.providers.knobs) as one proposal uses it: a source read for its
    knobs, a configuration rendered onto a source, an autotune config pinned; reads and renders
    see the values the original kernel's launches computed (`observed`)."""

    observed: Observed

    @classmethod
    def of(cls, ctx: ProviderContext) -> _Rewriter:
        return cls(computed_values(ctx.original_source, observed_values(ctx.launches)))

    def read(self, source: str) -> KnobSpace:
        return find_knobs(source, self.observed)

    def render(self, source: str, config: Config) -> str:
        return apply_knobs(source, config, self.observed)

    def pin(self, source: str, kernel: str, index: int) -> str:
        return pin_autotune(source, kernel, index)


@dataclass(frozen=True)
class _Search:
    """What one proposal searches and what is known of it, built once per propose (`survey`).

    `base` is the source whose knobs move (the parent, or a pinned config of its autotune list),
    `space` its knobs, `domains` the values each searched knob (`names`) may take. `points` are
    the measured configurations of this kernel by key, `taken` every key and source hash never to
    propose (measured, excluded, the baseline). `parent` is the parent's configuration; `center`
    the configuration the moves start from, `center_point` its measurement (None, or a failed
    point, when nothing measured a speedup). A search of one kernel's knobs (`focus`) has that
    kernel's names and only the points whose other knobs sit at the center."""

    ctx: ProviderContext
    rewriter: _Rewriter
    base: str
    space: KnobSpace
    knobs: dict[str, Knob]  # space's knobs by name
    domains: dict[str, list[int]]
    names: list[str]
    points: dict[str, _Point]
    taken: frozenset[str]
    parent: Config
    center: Config
    center_point: _Point | None

    @classmethod
    def survey(
        cls,
        ctx: ProviderContext,
        rewriter: _Rewriter,
        base: str,
        space: KnobSpace,
        domains: dict[str, list[int]],
    ) -> _Search:
        """The search from `base`, whose knobs `space` holds and `domains` bound: the evidence
        (every measured configuration of this kernel), the parent's configuration, the center."""
        knobs = space.by_name()
        names = sorted(domains)
        parent = {n: knobs[n].value for n in names}
        points, taken = _evidence(ctx, rewriter, base, space, names)
        # The center is the incumbent (the parent) when it is a measured configuration of this
        # kernel: a rejected neighbour that measured a hair faster does not move the search.
        center_point = points.get(_key(parent))
        if center_point is None or center_point.score is None:
            center_point = max(points.values(), key=lambda p: _order(p.score), default=None)
        center = (
            center_point.config
            if center_point is not None and center_point.score is not None
            else parent
        )
        if any(center[n] not in domains[n] for n in names):
            center = {n: _nearest(domains[n], center[n]) for n in names}
        return cls(
            ctx=ctx,
            rewriter=rewriter,
            base=base,
            space=space,
            knobs=knobs,
            domains=domains,
            names=names,
            points=points,
            taken=frozenset(taken),
            parent=parent,
            center=center,
            center_point=center_point,
        )

    def render(self, config: Config) -> str:
        return self.rewriter.render(self.base, config)

    def violation(self, config: Config) -> str | None:
        return _violation(self.ctx, self.space, config)

    def kernels(self) -> list[str]:
        """The kernels whose knobs are searched, the one that dominates the observed time
        first."""
        order = dominant_first(self.ctx.warm_launches or self.ctx.launches)
        return sorted({self.knobs[n].kernel for n in self.names}, key=lambda k: _rank(order, k))

    def focus(self, kernel: str) -> _Search:
        """The search of `kernel`'s knobs, the other kernels' knobs held at the center."""
        group = [n for n in self.names if self.knobs[n].kernel == kernel]
        others = [n for n in self.names if n not in group]
        here = {
            k: p
            for k, p in self.points.items()
            if all(p.config[o] == self.center[o] for o in others)
        }
        return replace(self, names=group, points=here)


class TuneProvider:
    """Searches launch/compile knobs by rewriting the parent source; see the module docstring.

    The walk of one proposal, in the order of this class: what is tuned (`_base`), what is known
    of it (`_Search.survey`), then the first of: the best known start (`_adoption`), a seed from
    the nearest history (`_seed`), the best untaken move (`_search`: `_moves`, then
    `_proposal`); else the search is exhausted."""

    name = "tune"
    model: str | None = None

    def __init__(self) -> None:
        self._proposed: dict[str, set[str]] = {}  # run_id -> source hashes proposed in this process
        self._told: set[str] = set()  # runs whose unreadable knobs are recorded

    # ---- the protocol ---------------------------------------------------------------------
    def propose(self, ctx: ProviderContext, record: Recorder) -> Proposal | SearchExhausted:
        """One configuration change of ctx.parent_source, or SearchExhausted with the reason."""
        try:
            rewriter = _Rewriter.of(ctx)
            base, space = self._base(ctx, rewriter)
            if isinstance(base, Proposal | SearchExhausted):
                return base
            domains = search_space(space, ctx.target, ctx.cases)
        except KnobError as e:
            raise ProviderError(f"tune: {e.message}") from e
        if space.unreadable and ctx.run_id not in self._told:
            self._told.add(ctx.run_id)
            record(KnobsUnreadable(candidate_id=ctx.parent_id, reasons=space.unreadable))
        if not domains:
            return _exhausted(space, "the kernel states no tunable launch or compile knob")
        search = _Search.survey(ctx, rewriter, base, space, domains)
        for step in (self._adoption, self._seed, self._search):
            proposal = step(search)
            if proposal is not None:
                return proposal
        best = search.center_point
        best_text = (
            f"{_key(best.config)} at {_score_text(best)}"
            if best is not None and best.score is not None
            else _key(search.parent)
        )
        return _exhausted(
            space,
            f"every neighbour of the best configuration ({best_text}) is measured, failed or "
            f"outside the constraints; {len(search.points)} configurations of this kernel "
            "measured",
        )

    # ---- what is being tuned --------------------------------------------------------------
    def _base(
        self, ctx: ProviderContext, rewriter: _Rewriter
    ) -> tuple[str | Proposal | SearchExhausted, KnobSpace]:
        """The source whose knobs are tuned: the parent, or a pinned config of its autotune list."""
        space = rewriter.read(ctx.parent_source)
        if not space.autotune_choices:
            return ctx.parent_source, space
        measured = {m.source_hash: m for m in ctx.measured}
        pooled = pool_by((m.source_hash, x) for m in ctx.measured for x in _measurements(m))
        best: tuple[float, str] | None = None
        for choice in space.autotune_choices:
            for i, config in enumerate(choice.configs):
                pinned = rewriter.pin(ctx.parent_source, choice.kernel, i)
                raw = raw_source_hash(pinned)
                entry = measured.get(raw)
                if entry is None:
                    if raw in self._proposed.get(ctx.run_id, set()):
                        continue
                    self._proposed.setdefault(ctx.run_id, set()).add(raw)
                    sig = _key(config)
                    return Proposal(
                        source=pinned,
                        hypothesis=(
                            f"Pinning the autotuner of {choice.kernel} to config {i} "
                            f"({sig}) measures that config alone and drops the tuning pass"
                        ),
                        evidence=(
                            f"{choice.kernel} autotunes over {len(choice.configs)} configs; "
                            "none of the pinned variants after this one has been measured"
                        ),
                        change=f"autotune configs of {choice.kernel} → [{sig}]",
                        expected_effect="the time of the config the autotuner would pick, or better",
                        risk="one config for every shape: cases with other sizes may prefer another",
                        hypothesis_kind=HypothesisKind.AUTOTUNE_PIN.value,
                        knobs=config,
                    ), space
                estimate = pooled.get(raw)
                if estimate is not None and (best is None or estimate.speedup > best[0]):
                    best = (estimate.speedup, pinned)
            if best is None:
                return _exhausted(
                    space, f"every autotune config of {choice.kernel} failed when pinned"
                ), space
            return best[1], rewriter.read(best[1])
        return ctx.parent_source, space

    # ---- the start: the best known configuration, or the nearest history -------------------
    def _adoption(self, s: _Search) -> Proposal | None:
        """Re-adopt, once per run and before searching, the best known configuration by pooled
        estimate when this run has not measured it: a configuration whose pooled estimate is
        below another known one's is never proposed as the start. The best need not have been
        promoted: a run rejects a configuration that did not beat that run's incumbent, and a
        new user's second run that adopted only promoted ones adopted nothing (its one promoted
        configuration, 1.67x, was below four rejected ones at 2.1-2.3x), searched elsewhere and
        ended without a winner. Measured again against this run's baseline, it is decided anew.
        One never promoted is adopted only when its pooled interval lies above 1.0: a figure
        within the baseline's noise is not worth an evaluation."""
        ctx = s.ctx
        proposed = self._proposed.setdefault(ctx.run_id, set())
        best = _best(s.points)
        if best is None or best.score is None or best.score <= 0 or best.estimate is None:
            return None
        if best.config == s.parent or ctx.run_id in best.runs:
            return None
        promoted = next(
            (
                m
                for m in ctx.prior_best
                if m.run_id != ctx.run_id and (m.run_id, m.candidate_id) in best.members
            ),
            None,
        )
        low = best.estimate.ci_low
        if promoted is None and (low is None or low <= 1.0):
            return None  # never promoted, and not clearly faster than the baseline: noise
        source = s.render(best.config)
        raw = raw_source_hash(source)
        if raw in proposed:
            return None
        proposed.add(raw)
        run_id, candidate_id = (
            (promoted.run_id, promoted.candidate_id)
            if promoted is not None
            else (best.run_id, best.candidate_id)
        )
        key, speedup = _key(best.config), best.estimate.speedup
        decided = (
            f"promoted in run {run_id}, {candidate_id}"
            if promoted is not None
            else "promoted in no run: a run's incumbent or interval held it back"
        )
        return Proposal(
            source=source,
            hypothesis=(
                f"The best known configuration ({key}), by the pooled estimate of every "
                "measurement of it, is the best known start: re-measure it against this run's "
                "baseline"
            ),
            evidence=(
                f"{key}: {_pooled_text(best.estimate)}, over {len(best.runs)} run(s) on this "
                f"bundle and hardware (first measured in run {best.run_id}, "
                f"{best.candidate_id}; {decided}); no other configuration of the "
                f"{len(s.points)} known measures better"
            ),
            change=_change(s.parent, best.config),
            expected_effect=f"about {speedup:.3g}x the baseline, as measured before",
            risk="none beyond measurement drift: the same source was measured before",
            hypothesis_kind=HypothesisKind.LAUNCH_CONFIG.value,
            knobs=best.config,
            # a re-measurement on purpose: the loop must not answer it with the old result
            remeasures=f"{run_id}/{candidate_id}",
        )

    def _seed(self, s: _Search) -> Proposal | None:
        """The next of the run's first ctx.history_seeds proposals: the nearest-history
        configuration ranked highest (ctx.nearest: other runs' winners on other cases, versions,
        devices of the family, an edited source) whose knobs all render onto this kernel, that
        breaks no constraint here and that this identity has not measured. It is re-measured
        against this run's baseline; the search then goes on from the incumbent, whatever the
        seed measured. The seeds already proposed are counted from the run's candidates, not
        in this process, so a resumed run does not seed again (_seeds_proposed)."""
        ctx = s.ctx
        if ctx.history_seeds <= 0:
            return None
        seeded = _seeds_proposed(s)
        if seeded >= ctx.history_seeds:
            return None
        proposed = self._proposed.setdefault(ctx.run_id, set())
        for near in ctx.nearest:
            config = _configuration(near.knobs, s.names)
            if config is None:
                continue  # a configuration of other knobs (an edit renamed or removed one)
            if config == s.parent or _key(config) in s.taken:
                continue
            if s.violation(config) is not None:
                continue
            try:
                source = s.render(config)
            except KnobError:
                continue  # its knobs do not render onto this version of the kernel
            raw = raw_source_hash(source)
            if raw in s.taken or raw in proposed:
                continue
            proposed.add(raw)
            key = _key(config)
            figure = _pooled_text(
                Estimate(near.speedup, near.ci_low, near.ci_high, near.measurements, 0)
            )
            return Proposal(
                source=source,
                hypothesis=(
                    f"The configuration that won on the nearest history ({key}, run "
                    f"{near.from_run_id}) is a better start than the untuned one: re-measure it "
                    "against this run's baseline"
                ),
                evidence=(
                    f"nearest history #{near.rank} (seed {seeded + 1} of {ctx.history_seeds}): "
                    f"{key} was promoted in run {near.from_run_id}, {near.from_candidate_id}, at "
                    f"{figure} there ({near.differs}); measured there, not here"
                ),
                change=_change(s.parent, config),
                expected_effect=(
                    f"near {near.speedup:.3g}x the baseline if what differs "
                    f"({near.differs}) does not move the optimum"
                ),
                risk=(
                    "another bundle, device or version may prefer another configuration; a seed "
                    "that measures worse costs one evaluation and the search goes on from the "
                    "incumbent"
                ),
                hypothesis_kind=HypothesisKind.LAUNCH_CONFIG.value,
                knobs=config,
                remeasures=(
                    f"{near.from_run_id}/{near.from_candidate_id}"
                    if raw == near.source_hash
                    else None
                ),
            )
        return None

    # ---- the search -------------------------------------------------------------------------
    def _search(self, s: _Search) -> Proposal | None:
        """The best untaken move: the knobs of the kernel that dominates the observed time
        first; those of the next kernel once the first has no move left."""
        proposed = self._proposed.setdefault(s.ctx.run_id, set())
        for kernel in s.kernels():
            for move in _moves(s.focus(kernel)):
                source = s.render(move.config)
                raw = raw_source_hash(source)
                if _key(move.config) in s.taken or raw in s.taken or raw in proposed:
                    continue
                proposed.add(raw)
                return _proposal(s, source, move)
        return None


# ---- the space ----------------------------------------------------------------------------------


def search_space(
    space: KnobSpace, target: TargetSpec, cases: list[CaseSpec]
) -> dict[str, list[int]]:
    """The values tune may give each knob: the target's declared `tuning_space` when it has one
    (the whole search), else by role: blocks are powers of two from 16 (or less, if the kernel
    starts lower) up to the largest integer case parameter, nested ones included (`bundle new`'s
    `shapes`: the widest dimension; at most 16384); warps and stages what the backend accepts;
    none of those two on the cpu backend, where the interpreter ignores them.
    """
    declared = declared_space(target.tuning_space)
    knobs = space.by_name()
    if declared:
        unknown = sorted(set(declared) - set(knobs))
        if unknown:
            raise ProviderError(
                f"tune: tuning_space names {', '.join(unknown)}, which the kernel does not have"
            )
        return {n: sorted(set(v) | {knobs[n].value}) for n, v in declared.items()}
    backend = target.backend
    largest = max((v for c in cases for v in _integers(c.parameters) if v > 0), default=_MAX_BLOCK)
    block_hi = min(_MAX_BLOCK, 1 << max(0, math.ceil(math.log2(largest))))
    out: dict[str, list[int]] = {}
    for k in space.knobs:
        info = space.kernels.get(k.kernel)
        if k.role == KnobRole.BLOCK:
            if k.value & (k.value - 1):
                continue  # not a power of two: the kernel chose it for a reason of its own
            lo = min(k.value, _MIN_BLOCK)
            hi = max(k.value, block_hi)
            out[k.name] = [1 << e for e in range(lo.bit_length() - 1, hi.bit_length())]
        elif k.role == KnobRole.WARPS and backend != "cpu":
            out[k.name] = sorted(set(_WARPS[backend]) | {k.value})
        elif k.role == KnobRole.STAGES and backend != "cpu":
            has_loop = info is not None and (info.uses_dot or info.loop_step_params)
            if has_loop or k.value != DEFAULT_NUM_STAGES:
                out[k.name] = sorted(set(_STAGES) | {k.value})
        elif k.role == KnobRole.INTEGER and k.value > 0 and not k.value & (k.value - 1):
            out[k.name] = [1 << e for e in range(0, max(k.value, 64).bit_length())]
    return out


def _integers(value: Any) -> Iterator[int]:
    """Every integer in a case parameter, through dicts and lists (not bools)."""
    if type(value) is int:
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _integers(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _integers(v)


def declared_space(tuning_space: Mapping[str, Any] | None) -> dict[str, list[int]]:
    """The space a target declares (target.json "tuning_space"): knob -> allowed integer values,
    sorted and deduplicated. A malformed declaration raises KnobError naming the knob."""
    out: dict[str, list[int]] = {}
    for name, values in (tuning_space or {}).items():
        if not isinstance(values, list) or not values:
            raise KnobError(f"tuning_space.{name}: must be a non-empty list of integers")
        if any(type(v) is not int or v <= 0 for v in values):
            raise KnobError(f"tuning_space.{name}: every value must be a positive integer")
        out[name] = sorted(set(values))
    return out


# ---- the evidence -------------------------------------------------------------------------------


def _evidence(
    ctx: ProviderContext, rewriter: _Rewriter, base: str, space: KnobSpace, names: list[str]
) -> tuple[dict[str, _Point], set[str]]:
    """Measured configurations of this kernel (by config key) and everything already taken
    (config keys and source hashes, including pending and excluded ones)."""
    parent_values = space.values()
    renders: dict[str, Config] = {}
    for src in (base, ctx.original_source, ctx.parent_source):
        try:
            renders[raw_source_hash(src)] = dict(rewriter.read(src).values())
        except KnobError:
            continue
    points: dict[str, _Point] = {}
    taken: set[str] = set()
    baseline = _baseline_config(ctx, rewriter, base, names)
    if baseline is not None:  # the unit of every speedup; the store lists decided candidates
        points[_key(baseline)] = _Point(baseline, 0.0, ctx.run_id, BASELINE_ID, -1)
        taken.add(_key(baseline))
    decided: dict[str, list[tuple[int, MeasuredCandidate, Config]]] = {}
    for order, m in enumerate(ctx.measured):  # oldest first
        taken.add(m.source_hash)
        config = _config_of(m, rewriter, base, names, parent_values, renders)
        if config is None:
            continue
        key = _key(config)
        taken.add(key)
        if m.outcome == "failed" or _measurement(m) is not None:
            decided.setdefault(key, []).append((order, m, config))
    for key, seen in decided.items():
        points[key] = _point(seen, points.get(key))
    for ex in ctx.exclusions:
        sig = parse_signature(ex.signature)
        if sig is not None and set(sig) == set(names):
            taken.add(_key(sig))
    return points, taken


def _baseline_config(
    ctx: ProviderContext, rewriter: _Rewriter, base: str, names: list[str]
) -> Config | None:
    """The original kernel's configuration, when it is the same kernel as `base`."""
    try:
        values = rewriter.read(ctx.original_source).values()
        if not all(n in values for n in names):
            return None
        config = {n: values[n] for n in names}
        same = rewriter.render(base, config) == ctx.original_source
    except KnobError:
        return None
    return config if same else None


def _config_of(
    m: MeasuredCandidate,
    rewriter: _Rewriter,
    base: str,
    names: list[str],
    parent_values: Config,
    renders: dict[str, Config],
) -> Config | None:
    """The configuration of this kernel a measured candidate is, or None: a source whose knobs
    `renders` knows, or one whose knobs rendered onto `base` give exactly its source hash."""
    if m.source_hash in renders:
        values = renders[m.source_hash]
        return {n: values[n] for n in names} if all(n in values for n in names) else None
    if not m.knobs or not all(n in m.knobs for n in names):
        return None
    config = {n: m.knobs[n] for n in names}
    full = {**parent_values, **{k: v for k, v in m.knobs.items() if k in parent_values}}
    try:
        rendered = rewriter.render(base, full)
    except KnobError:
        return None
    return config if raw_source_hash(rendered) == m.source_hash else None


def _configuration(knobs: Mapping[str, Any], names: list[str]) -> Config | None:
    """`knobs` as a configuration of the searched knobs, or None when one of them is missing or
    not an integer."""
    if not all(isinstance(knobs.get(n), int) for n in names):
        return None
    return {n: int(knobs[n]) for n in names}


def _seeds_proposed(s: _Search) -> int:
    """How many seeds this run has proposed: the nearest-history configurations among its
    candidates (ctx.measured of this run, the pending ones of its round included). Seeds come
    before any move of the search, so a nearest-history configuration the run holds was one (or
    the best known start, which then stood for it); read from the run, not kept in the
    provider's process, the count holds across a resume."""
    ctx = s.ctx
    mine = {
        _key(config)
        for m in ctx.measured
        if m.run_id == ctx.run_id and (config := _configuration(m.knobs, s.names)) is not None
    }
    history = {
        _key(config)
        for near in ctx.nearest
        if (config := _configuration(near.knobs, s.names)) is not None
    }
    return len(mine & history)


# ---- the moves ----------------------------------------------------------------------------------


def _moves(s: _Search) -> list[_Move]:
    """Every move from the center, best-ranked first: single-knob steps, coupled block/warps
    steps, paired moves, combined near-neutral steps."""
    inert = {n for n in s.names if _inert(s, n)}
    singles: list[_Move] = []
    for n in s.names:
        for d in (+1, -1):
            move = _single(s, n, d, n in inert)
            if move is not None:
                singles.append(move)
    singles += _coupled(s)
    pairs = _paired(s) + _combined(s)
    role_of = {n: s.knobs[n].role for n in s.names}
    return roofline_order.order(  # the roofline breaks ties within each rank class
        singles + pairs,
        lambda m: m.rank,
        lambda m: m.config,
        s.center,
        role_of,
        s.ctx.parent_kernel,
    )


def _single(s: _Search, n: str, d: int, inert: bool) -> _Move | None:
    """The step of knob `n` in direction `d` (+1 up, -1 down) from the center, or None."""
    center = s.center
    dom = s.domains[n]
    i = dom.index(center[n])
    line = {
        dom.index(p.config[n]): p
        for p in s.points.values()
        if p.config[n] in dom and all(p.config[o] == center[o] for o in s.names if o != n)
    }
    ahead = [j for j in line if (j - i) * d > 0]
    behind = [j for j in line if (j - i) * d < 0]
    room = (len(dom) - 1 - i) if d > 0 else i
    if room == 0:
        return None
    knob = s.knobs[n]
    if ahead:
        dist = min(abs(j - i) for j in ahead)
        if dist == 1:
            return None  # the neighbour that way is worse: closed
        step, kind = dist // 2, 2
    elif behind and line[(came := min(behind, key=lambda j: abs(j - i)))].order < (
        line[i].order if i in line else -1
    ):
        # the center was reached from behind, and it was better: double the stride
        step, kind = min(room, 2 * abs(came - i)), 1
    else:
        # a fresh direction: half the room, at most x4; stages step by one, and in a tl.dot
        # kernel tiles and warps step x2 (they interact: a x4 jump overshoots the optimum)
        info = s.space.kernels.get(knob.kernel)
        fine = knob.role == KnobRole.STAGES or (
            knob.role in (KnobRole.BLOCK, KnobRole.WARPS) and info is not None and info.uses_dot
        )
        step, kind = max(1, min(1 if fine else 2, math.ceil(room / 2))), 1
    for size in range(step, 0, -1):  # shrink until the constraints hold
        config = {**center, n: dom[i + d * size]}
        if _key(config) in s.points or s.violation(config) is not None:
            continue
        gain, note = _direction_evidence(s, n, d)
        role = _ROLE_ORDER[knob.role]
        if inert:
            return _Move(config, (5, role, -d), f"{note} {n} has made no measurable difference.")
        rank = (
            (0, -gain)
            if gain is not None and gain > 0
            else (kind, role, -d)
            if gain is None
            else (3, -gain)
            if gain > _HURT
            else (6, -gain)  # clearly hurt before: after the paired moves
        )
        return _Move(config, rank, note)
    return None


def _coupled(s: _Search) -> list[_Move]:
    """A block step measured slower from the center is retried with the warps scaled by the
    same factor, so each thread keeps the values it holds now: on a GPU a wider block (or a
    wider tl.dot tile: a bigger accumulator) with the same warps can lose to register pressure
    what it gains in loop trips or reuse."""
    if s.ctx.target.backend == "cpu":
        return []
    center = s.center
    out: list[_Move] = []
    for n in s.names:
        k = s.knobs[n]
        info = s.space.kernels.get(k.kernel)
        warps = next(
            (w for w in s.names if s.knobs[w].role == KnobRole.WARPS and _together(s, n, w)),
            None,
        )
        if k.role != KnobRole.BLOCK or warps is None or info is None:
            continue
        if info.uses_dot and _dim_of(n) not in ("M", "N"):
            continue  # BLOCK_K does not change the accumulator each thread holds
        for p in s.points.values():
            if p.config[n] <= center[n]:
                continue  # only a wider block gains from more warps
            if any(p.config[o] != center[o] for o in s.names if o != n):
                continue
            factor = p.config[n] / center[n]
            want = center[warps] * factor
            if want not in s.domains[warps] or want == center[warps]:
                continue
            config = {**center, n: p.config[n], warps: int(want)}
            if _key(config) in s.points or s.violation(config) is not None:
                continue
            out.append(
                _Move(
                    config,
                    (1, _ROLE_ORDER[KnobRole.BLOCK], 0),
                    f"{n} {center[n]}→{p.config[n]} with {center[warps]} warps measured "
                    f"{'a failure' if p.score is None else 'slower'} ({p.candidate_id}); with "
                    f"{int(want)} warps each thread keeps the values it holds now.",
                )
            )
    return out


def _paired(s: _Search) -> list[_Move]:
    """Paired moves (ranked after the promising single ones) reach couplings one knob cannot:
    a block and the warps of its kernel move together (the work per thread stays the same);
    two blocks of one kernel move oppositely (the tile changes shape, not size)."""
    center, domains = s.center, s.domains
    pairs: list[_Move] = []
    for a_i, a in enumerate(s.names):
        for b in s.names[a_i + 1 :]:
            ka, kb = s.knobs[a], s.knobs[b]
            roles = {ka.role, kb.role}
            if not _together(s, a, b):  # one kernel; for computed knobs, one shape
                continue
            if roles == {KnobRole.BLOCK, KnobRole.WARPS}:
                signs = [(+1, +1), (-1, -1)]
            elif roles == {KnobRole.BLOCK}:
                signs = [(+1, -1), (-1, +1)]
            else:
                continue
            for da, db in signs:
                ia, ib = domains[a].index(center[a]) + da, domains[b].index(center[b]) + db
                if not (0 <= ia < len(domains[a]) and 0 <= ib < len(domains[b])):
                    continue
                config = {**center, a: domains[a][ia], b: domains[b][ib]}
                if _key(config) in s.points or s.violation(config) is not None:
                    continue
                pairs.append(
                    _Move(
                        config,
                        (4, _ROLE_ORDER[ka.role], -da, -db),
                        "every single-knob move from the best configuration is measured; "
                        f"moving {a} and {b} together",
                    )
                )
    return pairs


def _combined(s: _Search) -> list[_Move]:
    """Two single-knob steps from the center that each measured nearly as good (within 10%),
    taken together. Knobs interact: in a matmul a larger tile with two stages and a third stage
    with the smaller tile can each lose a little while both together win (the larger tile needs
    the deeper pipeline to hide its loads). They come last, after every other move (on the
    measured H200 matmul landscape, ranked earlier they cost more candidates than they saved);
    best-measured pairs first."""
    center = s.center
    here = s.points.get(_key(center))
    if here is None or here.score is None:
        return []
    steps: list[tuple[str, _Point, float]] = []  # (knob, point, log-gain over the center)
    for p in s.points.values():
        differ = [n for n in s.names if p.config[n] != center[n]]
        if len(differ) == 1 and p.score is not None and p.score - here.score > _HURT:
            steps.append((differ[0], p, p.score - here.score))
    out: list[_Move] = []
    for i, (a, p, gain_a) in enumerate(steps):
        for b, q, gain_b in steps[i + 1 :]:
            if a == b:
                continue
            config = {**center, a: p.config[a], b: q.config[b]}
            if _key(config) in s.points or s.violation(config) is not None:
                continue
            gain = gain_a + gain_b
            out.append(
                _Move(
                    config,
                    (7, -gain),
                    f"{a} {center[a]}→{p.config[a]} ({p.candidate_id}) and {b} "
                    f"{center[b]}→{q.config[b]} ({q.candidate_id}) each measured within 10% "
                    "of the best; together they may win what each alone cannot.",
                )
            )
    return out


def _direction_evidence(s: _Search, name: str, d: int) -> tuple[float | None, str]:
    """What the evidence says of moving `name` in direction d from the center, as a log-gain.

    A step already measured from the center itself decides; otherwise the trend measured in the
    context most like the center (a pair of configurations differing only in `name`, the step
    going that way, whose other knobs are nearest the center's in log2 distance). Knobs
    interact: the best gain seen anywhere is a poor guide (lowering BLOCK_M helped once a tile
    was 128 wide; it does not help a 64-wide one)."""
    center, names = s.center, s.names
    direct: tuple[float, _Point, _Point] | None = None
    trend: tuple[float, float, _Point, _Point] | None = None  # (distance, -gain, p, q)
    pts = list(s.points.values())
    for p in pts:
        if p.score is None:
            continue
        for q in pts:
            if (q.config[name] - p.config[name]) * d <= 0:
                continue
            if any(p.config[o] != q.config[o] for o in names if o != name):
                continue
            gain = (q.score - p.score) if q.score is not None else -10.0
            if p.config == center:
                if direct is None or gain > direct[0]:
                    direct = (gain, p, q)
                continue
            distance = sum(
                abs(math.log2(p.config[o]) - math.log2(center[o]))
                if p.config[o] > 0 and center[o] > 0
                else float(p.config[o] != center[o])
                for o in names
            )
            if trend is None or (distance, -gain) < trend[:2]:
                trend = (distance, -gain, p, q)
    found = direct or (None if trend is None else (-trend[1], trend[2], trend[3]))
    if found is None:
        way = "raising" if d > 0 else "lowering"
        return None, f"{way} {name} from here is unexplored."
    gain, p, q = found
    step = f"{name} {p.config[name]}→{q.config[name]}"
    if q.score is None:
        return gain, f"{step} hurt before (failed, {q.candidate_id})."
    ses = [log_se(e) if e is not None else 0.0 for e in (p.estimate, q.estimate)]
    if None in ses or not any(ses):  # no interval known: the point estimates alone
        verb = "helped" if gain > 0 else "hurt"
        return gain, f"{step} {verb} before ({math.exp(gain):.3g}x, {q.candidate_id})."
    half = Z_99 * math.hypot(*(se or 0.0 for se in ses))
    lo, hi = math.exp(gain - half), math.exp(gain + half)
    interval = f"99% CI {lo:.3g}-{hi:.3g}"
    if lo <= 1.0 <= hi:  # a point estimate inside the noise is no direction
        return gain, (
            f"{step} changed nothing clear before ({math.exp(gain):.3g}x, {interval}, "
            f"{q.candidate_id})."
        )
    verb = "helped" if gain > 0 else "hurt"
    return gain, f"{step} {verb} before ({math.exp(gain):.3g}x, {interval}, {q.candidate_id})."


def _inert(s: _Search, name: str) -> bool:
    """Every measured change of `name` alone moved the time by less than 1%: it seems not to
    matter here (num_stages of a loop the compiler does not pipeline, say)."""
    gains = [
        abs(q.score - p.score)
        for p in s.points.values()
        for q in s.points.values()
        if p.score is not None
        and q.score is not None
        and p.config[name] < q.config[name]
        and all(p.config[o] == q.config[o] for o in s.names if o != name)
    ]
    return bool(gains) and max(gains) < math.log(1.01)


# ---- the proposal text ----------------------------------------------------------------------------


def _proposal(s: _Search, source: str, move: _Move) -> Proposal:
    """The proposal of `move` from the parent: its hypothesis, effect and risk per changed knob,
    and the evidence (the best measured configuration, and what was measured of this move)."""
    parent, center = s.parent, s.center_point
    changed = [n for n in move.config if move.config[n] != parent.get(n)]
    effects, hyps, risks = [], [], []
    for n in changed:
        h, e, r = _explain(s, n, parent[n], move.config[n])
        hyps.append(h)
        effects.append(e)
        risks.append(r)
    best = (
        "the baseline"
        if center is None or center.score is None
        else f"{_key(center.config)} at {_score_text(center)} "
        f"(run {center.run_id}, {center.candidate_id})"
    )
    evidence = (
        f"Best measured configuration: {best}; {len(s.points)} configurations of this kernel "
        f"measured on {s.ctx.device.kind}. {move.evidence}"
    )
    kind = (
        HypothesisKind.NUM_WARPS
        if changed == ["num_warps"]
        else (
            HypothesisKind.NUM_STAGES
            if changed == ["num_stages"]
            else HypothesisKind.BLOCK_SIZE
            if all(s.knobs[n].role == KnobRole.BLOCK for n in changed)
            else HypothesisKind.LAUNCH_CONFIG
        )
    )
    return Proposal(
        source=source,
        hypothesis="; ".join(hyps),
        evidence=evidence,
        change=_change(parent, move.config),
        expected_effect="; ".join(effects),
        risk="; ".join(risks),
        hypothesis_kind=kind.value,
        commit_title=f"Tune {_change(parent, move.config)}",
        knobs=move.config,
    )


def _exhausted(space: KnobSpace, why: str) -> SearchExhausted:
    """The end of the search; when some knobs were unreadable, that is the reason it ends."""
    if not space.unreadable:
        return SearchExhausted(reason=f"tune: {why}")
    return SearchExhausted(
        reason=f"tune: {why}; knobs it could not read: {'; '.join(space.unreadable)}",
        stopping_reason=StoppingReason.KNOBS_UNREADABLE,
    )


# ---- pure helpers ------------------------------------------------------------------------------


def _rank(order: list[str], kernel: str) -> int:
    return order.index(kernel) if kernel in order else len(order)


def _measurement(m: MeasuredCandidate) -> Measurement | None:
    """A decision that measured a speedup (promoted or rejected), as pooling takes it; a
    failure, a duplicate (it repeats its original's figure) or an undecided one is none."""
    if m.outcome not in ("promoted", "rejected") or m.speedup is None or m.speedup <= 0:
        return None
    return Measurement(m.speedup, m.ci_low, m.ci_high)


def _measurements(m: MeasuredCandidate) -> list[Measured]:
    """Every measurement of the entry's source that the views pool for it (source_estimates):
    its decision's and its final revalidations'."""
    decided = _measurement(m)
    return [*([] if decided is None else [decided]), *m.revalidations]


def _point(seen: list[tuple[int, MeasuredCandidate, Config]], unit: _Point | None) -> _Point:
    """One configuration's point from its decided entries (oldest first): the pooled estimate of
    its measurements, or a failure when none measured a speedup. The baseline's configuration
    (`unit`) stays the unit of every speedup unless it was measured as a candidate too."""
    order, first, config = seen[0]
    ms = [(0, x) for _, m, _ in seen for x in _measurements(m)]
    estimate = pool_by(ms).get(0)
    if estimate is None and unit is not None:
        return unit
    return _Point(
        config,
        None if estimate is None else math.log(estimate.speedup),
        first.run_id if unit is None else unit.run_id,
        first.candidate_id if unit is None else unit.candidate_id,
        order if unit is None else unit.order,
        estimate,
        frozenset((m.run_id, m.candidate_id) for _, m, _ in seen),
    )


def _best(points: dict[str, _Point]) -> _Point | None:
    """The known configuration with the best pooled score (the first measured on a tie)."""
    scored = [p for p in points.values() if p.score is not None]
    return max(scored, key=lambda p: (p.score, -p.order), default=None)


def _pooled_text(e: Estimate) -> str:
    """A pooled figure with what it pools: '17.4x the baseline [99% CI 16.9, 18], pooled
    over 3 measurements'."""
    ci = (
        ""
        if e.ci_low is None or e.ci_high is None
        else f" [99% CI {e.ci_low:.3g}, {e.ci_high:.3g}]"
    )
    what = (
        "1 measurement"
        if e.measurements == 1
        else f"pooled over {e.measurements} measurements"
        if ci
        else f"the geometric mean of {e.measurements} measurements without a CI"
    )
    aside = f"; {e.set_aside} without a CI set aside" if e.set_aside else ""
    return f"{e.speedup:.3g}x the baseline{ci}, {what}{aside}"


def _score_text(p: _Point) -> str:
    if p.estimate is None:
        return f"{math.exp(p.score or 0.0):.3g}x the baseline"
    return _pooled_text(p.estimate)


def _order(score: float | None) -> float:
    return -math.inf if score is None else score


def _nearest(domain: list[int], value: int) -> int:
    return min(domain, key=lambda v: (abs(math.log2(v) - math.log2(value)), v))


def _change(parent: Config, config: Config) -> str:
    return ", ".join(
        f"{n} {parent.get(n)}→{config[n]}" for n in config if config[n] != parent.get(n)
    )


def _per_thread(block_elems: int, warps: int) -> float:
    return block_elems / (32 * warps)


def _dim_of(name: str) -> str | None:
    """ "M", "N" or "K" for a tile knob of a tl.dot kernel, by its name (BLOCK_M, BN, TILE_K...;
    a computed tile's knob of one key, BLOCK_M[128], too)."""
    up = name.upper().split(".")[-1].split("[")[0]
    for dim in ("M", "N", "K"):
        if up.endswith(f"_{dim}") or up in (f"B{dim}", f"BLOCK{dim}", f"TILE_{dim}"):
            return dim
    return None


def _launch_variants(space: KnobSpace, kernel: str) -> list[list[Knob]]:
    """The knobs of `kernel` that set one launch, per kind of launch. A computed value's knob
    sets only the launches whose computation gave its key, so the knobs of two keys (two
    shapes) never meet in one launch: each observed launch is one variant; without
    observations (or for a key no launch showed), every combination of keys is."""
    mine = [k for k in space.knobs if k.kernel == kernel]
    plain = [k for k in mine if k.key is None]
    tables: dict[str | None, list[Knob]] = {}
    for k in mine:
        if k.key is not None:
            tables.setdefault(k.param, []).append(k)
    if not tables:
        return [mine]
    names = space.by_name()
    seen = [
        [names[n] for n in launch] for launch in space.launches if names[launch[0]].kernel == kernel
    ]
    if not {k.name for g in tables.values() for k in g} <= {k.name for v in seen for k in v}:
        seen = [list(combo) for combo in itertools.product(*tables.values())]
    return [plain + variant for variant in seen]


def _together(s: _Search, a: str, b: str) -> bool:
    """Whether knobs `a` and `b` set one launch (the same kernel; for computed knobs, the
    same shape): only then do they interact."""
    variants = _launch_variants(s.space, s.knobs[a].kernel)
    return any({a, b} <= {k.name for k in variant} for variant in variants)


def _violation(ctx: ProviderContext, space: KnobSpace, config: Config) -> str | None:
    """Why `config` cannot compile, cannot be correct or is known to be wasteful, or None.
    Blocks are checked per launch: the knobs of a computed value's keys each apart."""
    values = {**space.values(), **config}
    for k in space.knobs:
        v = values[k.name]
        info = space.kernels.get(k.kernel)
        block = k.role == KnobRole.BLOCK or (info is not None and k.name in info.arange_params)
        if block and v & (v - 1):
            return f"{k.name}={v} is not a power of two"
        below = k.key is not None and v < k.key and not (k.loop_step or k.grid_follows)
        if k.role == KnobRole.BLOCK and below:
            # the host sized the grid (or the one block a row gets) for the computed value; a
            # grid that divides by the value reads its table too (knobs._value_sites)
            return f"{k.name}={v} is below the block {k.key} the kernel computes for its shape"
    if ctx.target.backend == "cpu":
        return None
    for kernel, info in space.kernels.items():
        for variant in _launch_variants(space, kernel):
            why = _launch_violation(ctx, info, variant, values)
            if why is not None:
                return why
    return None


def _launch_violation(
    ctx: ProviderContext, info: KernelInfo, knobs: list[Knob], values: Config
) -> str | None:
    """Why one launch of `info` with `knobs` at `values` cannot run or wastes the GPU, or None."""
    blocks = [values[k.name] for k in knobs if k.role == KnobRole.BLOCK]
    warps = next((values[k.name] for k in knobs if k.role == KnobRole.WARPS), DEFAULT_NUM_WARPS)
    stages = next((values[k.name] for k in knobs if k.role == KnobRole.STAGES), DEFAULT_NUM_STAGES)
    if info.uses_dot:
        dims = {
            dim: values[k.name]
            for k in knobs
            if k.role == KnobRole.BLOCK and (dim := _dim_of(k.name)) is not None
        }
        if any(v < 16 for v in dims.values()):
            return "tl.dot needs tiles of at least 16"
        if {"M", "N", "K"} <= set(dims):
            elem = _element_bytes(ctx)
            smem = stages * (dims["M"] * dims["K"] + dims["K"] * dims["N"]) * elem
            if smem > _smem_limit(ctx):
                return f"{smem} bytes of shared memory exceed the {_smem_limit(ctx)} available"
            if _per_thread(dims["M"] * dims["N"], warps) > _MAX_ACC_VALUES_PER_THREAD:
                return "the accumulator needs more registers per thread than exist"
        return None
    widest = max(blocks, default=1)
    if blocks and _per_thread(widest, warps) > _MAX_ROW_VALUES_PER_THREAD:
        return f"{widest} elements over {warps} warps spill registers"
    if math.prod(blocks) > _MAX_TENSOR_NUMEL:
        return "a block tensor over Triton's element limit"
    return None


def _element_bytes(ctx: ProviderContext) -> int:
    sizes = {
        "float32": 4,
        "fp32": 4,
        "float16": 2,
        "fp16": 2,
        "bfloat16": 2,
        "bf16": 2,
        "float8": 1,
    }
    found = [
        sizes[str(c.parameters.get("dtype"))]
        for c in ctx.cases
        if str(c.parameters.get("dtype")) in sizes
    ]
    return max(found, default=2)


def _smem_limit(ctx: ProviderContext) -> int:
    arch = (ctx.device.architecture or ctx.target.architecture or "").lower().replace(".", "")
    for key, limit in _SMEM_BYTES_BY_ARCH.items():
        if key.replace("sm_", "") in arch:
            return limit
    return _DEFAULT_SMEM_BYTES


def _times(before: int, after: int) -> str:
    """How `after` compares with `before`, as "4x" (four times as much) or "1/4" (a quarter):
    the arguments in the order of the change the text describes, so that a quantity that falls
    as the knob rises (programs, loop trips) reads `_times(b, a)` for a knob a→b."""
    r = after / before
    return f"{r:g}x" if r >= 1 else f"1/{1 / r:g}"


def _explain(s: _Search, name: str, a: int, b: int) -> tuple[str, str, str]:
    """(hypothesis, expected effect, risk) of one knob change a→b."""
    knob = s.knobs[name]
    up = b > a
    where = "the interpreter" if s.ctx.target.backend == "cpu" else "the GPU"
    if knob.role == KnobRole.BLOCK and knob.loop_step:
        return (
            (
                f"{'Wider' if up else 'Narrower'} blocks ({name} {a}→{b}) "
                + (
                    "amortize the per-iteration overhead of the loop over more elements"
                    if up
                    else "cut the masked work of partial blocks and the registers each thread holds"
                )
            ),
            f"{name} {a}→{b}: {_times(b, a)} the loop trips per program",
            (
                "more registers per thread, and masked work where a row is shorter than the block"
                if up
                else f"more loop iterations, each paying {where}'s fixed cost"
            ),
        )
    if knob.role == KnobRole.BLOCK and not knob.grid_follows:
        # the grid does not divide by it (one program per row) or tune cannot read the grid:
        # the number of programs is not the knob's to change
        return (
            f"{'Larger' if up else 'Smaller'} tiles ({name} {a}→{b}) change the work per program "
            + ("and the reuse of each loaded element" if up else "and the registers it holds"),
            f"{name} {a}→{b}: each program covers {_times(a, b)} the elements",
            "more shared memory and registers per program (occupancy may fall)"
            if up
            else "less reuse per loaded element",
        )
    if knob.role == KnobRole.BLOCK:
        return (
            f"{'Larger' if up else 'Smaller'} tiles ({name} {a}→{b}) change the work per program "
            + (
                "and the reuse of each loaded element"
                if up
                else "and allow more programs in flight"
            ),
            f"{name} {a}→{b}: each program covers {_times(a, b)} the elements, "
            f"{_times(b, a)} as many programs"
            if up
            else f"{name} {a}→{b}: {_times(b, a)} as many programs, each doing {_times(a, b)} "
            "the work",
            "more shared memory and registers per program (occupancy may fall)"
            if up
            else "less reuse per loaded element; more launch and scheduling overhead",
        )
    if knob.role == KnobRole.WARPS:
        return (
            (
                f"{'More' if up else 'Fewer'} warps per program (num_warps {a}→{b}) "
                + (
                    "spread each block over more threads, more loads in flight"
                    if up
                    else "give each thread more elements and leave room for more programs per SM"
                )
            ),
            f"num_warps {a}→{b}: each thread handles {_times(b, a)} the elements",
            "idle threads when the block is too small for them"
            if up
            else "register pressure: more values per thread",
        )
    if knob.role == KnobRole.STAGES:
        return (
            f"{'Deeper' if up else 'Shallower'} software pipelining (num_stages {a}→{b}) "
            + ("hides more memory latency" if up else "frees shared memory for occupancy"),
            f"num_stages {a}→{b}: {b} loads in flight per loop instead of {a}",
            "shared memory grows with every stage" if up else "less latency hidden",
        )
    return (
        f"{name} {a}→{b} changes how work is grouped across programs",
        f"{name} {a}→{b}",
        "the effect of this constant depends on the kernel",
    )


def create(options: ProviderOptions) -> TuneProvider:
    """The tune provider needs no options: everything it uses comes from the context."""
    return TuneProvider()
