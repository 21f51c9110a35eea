"""Schema evolution on read: `upcast_vN_vN+1` steps, applied to a record's payload.

An event type's payload changes only together with its SCHEMA_VERSION; the change comes with one
step here that rewrites a payload of the previous version into the next. Reading applies the steps
in order until the payload reaches the current version, so logs, stores and exports written by an
older tlxdb keep loading. Old payloads are kept as golden files under tests/tlxstore/golden/.

`Upcasters` is a value (not a registry filled at import time) so a codec can be built with other
steps; RELEASED holds the steps of every released change:

- v2 of BenchmarkSampled, DecisionMade, FinalistRevalidated, RunStarted (measurement windows and
  noisy-case notes, docs/GUARDS.md "Noisy cases"): a v1 sample was measured alone (window_id
  None); a v1 decision's `measured` is unknown (None: the store derives it as v1 did) and it has
  no notes; a v1 run decided under the TLX agent's CV gate (strict_noise) and measured no extra
  blocks, so a replay of it decides as it did.
- v3 of RunStarted (the cases' parameters, for the nearest history of a kernel; how many of its
  configurations tune re-measures first): a v2 run did not record the parameters ({}: unknown;
  nearest_history then compares its bundle by digest alone) and seeded nothing (0).
- v3 of BenchmarkSampled (two instances of a source in one window, docs/GUARDS.md "A second
  window before a promotion"): a v2 window measured one instance of each member (`instance` 1);
  so did a window of a v1 MachineSampled.
- v3 of DecisionMade (what the interval carried of instances, typed): a v2 decision's is unknown
  (`instance_df` and `instance_sigma` None, no `instance_pairs`; its notes say it in words).
- v2 of CandidateProposed (one meaning per word: "replay" is re-deciding a run from its events):
  v1's `replays`, the recorded candidate a proposal measures again, is `remeasures`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

Payload = dict[str, Any]
Step = Callable[[Payload], Payload]


@dataclass(frozen=True)
class Upcasters:
    """Steps keyed by (event type, version they read); each returns the payload of version + 1."""

    steps: Mapping[tuple[str, int], Step] = field(default_factory=dict)

    def upcast(self, event_type: str, version: int, target: int, payload: Payload) -> Payload:
        """The payload rewritten from `version` to `target`; KeyError names a missing step."""
        while version < target:
            step = self.steps.get((event_type, version))
            if step is None:
                raise KeyError(f"no upcaster for {event_type} v{version} -> v{version + 1}")
            payload = step(dict(payload))
            version += 1
        return payload


def _v1_sampled(payload: Payload) -> Payload:
    payload.setdefault("window_id", None)
    return payload


def _first_instance(payload: Payload) -> Payload:
    """BenchmarkSampled v2, MachineSampled v1: one instance of each member in a window."""
    payload.setdefault("instance", 1)
    return payload


def _v1_decided(payload: Payload) -> Payload:
    payload.setdefault("measured", None)
    payload.setdefault("notes", [])
    return payload


def _v1_revalidated(payload: Payload) -> Payload:
    payload.setdefault("notes", [])
    return payload


def _v1_started(payload: Payload) -> Payload:
    thresholds = dict(payload.get("thresholds") or {})
    thresholds.setdefault("strict_noise", True)
    thresholds.setdefault("max_extra_blocks", 0)
    payload["thresholds"] = thresholds
    return payload


def _v2_started(payload: Payload) -> Payload:
    payload.setdefault("case_parameters", {})
    thresholds = dict(payload.get("thresholds") or {})
    thresholds.setdefault("history_seeds", 0)
    payload["thresholds"] = thresholds
    return payload


def _v2_decided(payload: Payload) -> Payload:
    payload.update(instance_df=None, instance_sigma=None, instance_pairs=[])
    return payload


def _v1_proposed(payload: Payload) -> Payload:
    payload["remeasures"] = payload.pop("replays", None)
    return payload


RELEASED = Upcasters(
    {
        ("CandidateProposed", 1): _v1_proposed,
        ("BenchmarkSampled", 1): _v1_sampled,
        ("BenchmarkSampled", 2): _first_instance,
        ("MachineSampled", 1): _first_instance,
        ("DecisionMade", 1): _v1_decided,
        ("DecisionMade", 2): _v2_decided,
        ("FinalistRevalidated", 1): _v1_revalidated,
        ("RunStarted", 1): _v1_started,
        ("RunStarted", 2): _v2_started,
    }
)
