"""The machine as evidence in decisions: pure functions of a run's events.

- `marks`: a harness benchmark call whose MachineSampled shows a degrading clocks event reason
  (DEGRADING_REASONS: the GPU slowed its clocks to protect itself: a hardware slowdown, thermal
  slowdown by software or hardware, the power brake) or another process on the device is
  *marked*. Its samples stay in the store; every decision leaves them out (the policy's
  window_blocks), and the evaluator measures its case again in more blocks of the window, a
  whole turn at a time, as many blocks as it had marked calls
  (optimizer.evaluation.window.MAX_REMEASURED_BLOCKS at most). The software power cap is not degrading:
  a GPU at its power limit clocks down under every heavy kernel, the baseline's as much as the
  candidate's, and that is the state it is measured in. The neighbour rule does not know what
  the other process did; it shared the GPU's memory bandwidth, SMs or clocks, and any of those
  moves a timing by more than the wins tlxdb looks for.
- `host_costs`: the host cost of one call of a case: the candidate's median sample (what the
  harness times per call) less the GPU time of the candidate's own kernels per call, from
  tlxdb's launch attribution under Proton: each kernel the candidate's source defines (a `def`
  of its name), its time over the launches of the main kernel (one a timed call); the main
  kernel alone where no name matches. A harness's own kernels (do_bench's L2 flush between
  calls, a reference) are not the candidate's and are not timed in its samples. A case whose
  latency is within HOST_BOUND_FACTOR of its host cost is host-bound: a kernel change can move
  only the rest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from optimizer.units import number
from tlxstore.events import MachineSampled, Phase
from tlxstore.fold import CandidateState, RunState

DEGRADING_REASONS = (
    "hw_slowdown",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
)
"""NVML's clocks event reasons that mark a call (queries/views/machine_states.sql lists them too;
tests/queries/test_machine_views.py holds the two lists equal)."""

HOST_BOUND_FACTOR = 1.5
"""A case is host-bound when its latency is under 1.5x the host cost of one call, as the TLX
agent's harness flags it: two thirds of its time or more is host work (the Python wrapper,
argument handling, the launch), which no kernel change touches."""

Call = tuple[str, str, int, int]
"""One harness benchmark call in a window: (candidate id, case id, block, instance)."""


def marks(e: MachineSampled) -> list[str]:
    """Why a call is left out of decisions, one text per cause ([]: it is not)."""
    out = [
        f"{reason} in {n} of {e.readings} readings"
        for reason, n in e.reasons.items()
        if reason in DEGRADING_REASONS and n > 0
    ]
    for nb in e.neighbours:
        name = f" ({nb.name})" if nb.name else ""
        out.append(f"process {nb.pid}{name} on the GPU in {nb.readings} of {e.readings} readings")
    return out


def marked_calls(state: RunState, window_id: str, phase: Phase) -> dict[Call, list[str]]:
    """The marked calls of one window, each with why."""
    out: dict[Call, list[str]] = {}
    for cid, c in state.candidates.items():
        for e in c.machine:
            if e.window_id == window_id and e.phase == phase and (why := marks(e)):
                out[(cid, e.case_id, e.block, e.instance)] = why
    return out


def marked_note(state: RunState, window_id: str, phase: Phase) -> str | None:
    """A decision's note on the window's marked calls (None: there were none)."""
    marked = marked_calls(state, window_id, phase)
    if not marked:
        return None
    calls = sum(1 for c in state.candidates.values() for s in c.window_samples(window_id, phase))
    (cid, case, block, _), why = next(iter(marked.items()))
    return (
        f"{len(marked)} of {calls} benchmark calls ran while the GPU throttled or was shared "
        f"(first: {cid} case {case} block {block}: {'; '.join(why)}): left out of the decision, "
        "its case measured again in as many more blocks"
    )


def every_call_marked(state: RunState, cid: str, window_id: str, phase: Phase) -> list[str]:
    """The cases whose every call of `cid` in the window is marked (nothing of them can be
    decided on)."""
    marked = marked_calls(state, window_id, phase)
    calls: dict[str, list[bool]] = {}
    for s in state.candidates[cid].window_samples(window_id, phase):
        calls.setdefault(s.case_id, []).append((cid, s.case_id, s.block, s.instance) in marked)
    return [case for case, flags in calls.items() if flags and all(flags)]


@dataclass(frozen=True)
class HostCost:
    """One case's time per harness call, split into what the GPU did and the rest."""

    case_id: str
    latency_us: float  # the harness's median sample
    device_us: float  # GPU time per call (Proton)

    @property
    def host_us(self) -> float:
        return max(self.latency_us - self.device_us, 0.0)

    @property
    def host_share(self) -> float:
        return self.host_us / self.latency_us

    @property
    def host_bound(self) -> bool:
        return self.latency_us < HOST_BOUND_FACTOR * self.host_us

    def note(self) -> str:
        return (
            f"case {self.case_id}: {self.host_share:.0%} of the time is host work; kernel "
            f"changes move at most {1 - self.host_share:.0%} ({number(self.latency_us)} us per call, "
            f"{number(self.device_us)} us of it on the GPU)"
        )


def _device_us(cand: CandidateState, case_id: str, source: str) -> float | None:
    """GPU time per call of a case from the candidate's launch attribution (the kernels it
    names, main first): the time of those `source` defines, else of the main kernel, over the
    main kernel's launches; None without an attribution."""
    for p in reversed(cand.profiles):
        if p.case_id != case_id or not p.kernel_names:
            continue
        values = {m.name: m.value for m in p.metrics if m.source == "proton"}
        launches = values.get(f"kernel_launches:{p.kernel_names[0]}")
        own = [k for k in p.kernel_names if re.search(rf"\bdef\s+{re.escape(k)}\s*\(", source)]
        times = [values.get(f"kernel_time_us:{k}") for k in own or p.kernel_names[:1]]
        if launches and times and all(t is not None for t in times):
            return sum(t for t in times if t is not None) / launches
    return None


def host_costs(cand: CandidateState, latency_us: dict[str, float], source: str) -> list[HostCost]:
    """The host cost of each case with a latency (us per call) and an attribution; `source`:
    the candidate's source text (which kernels are its own)."""
    out = []
    for case_id, latency in latency_us.items():
        device = _device_us(cand, case_id, source)
        if device is not None and latency > 0:
            out.append(HostCost(case_id, latency, device))
    return out


def host_notes(state: RunState, cid: str, latency_us: dict[str, float]) -> list[str]:
    """A decision's notes on its host-bound cases."""
    cand = state.candidates[cid]
    stored = state.sources.get(cand.proposal.source_hash)
    source = stored.text if stored is not None else ""
    return [h.note() for h in host_costs(cand, latency_us, source) if h.host_bound]
