"""Schema evolution on read: `upcast_vN_vN+1` steps, applied to a record's payload.

An event type's payload changes only together with its SCHEMA_VERSION; the change comes with one
step here that rewrites a payload of the previous version into the next. Reading applies the steps
in order until the payload reaches the current version, so logs, stores and exports written by an
older tlxdb keep loading. Old payloads are kept as golden files under tests/tlxstore/golden/.

Every released event type is at version 1 so far, so the released table is empty; `Upcasters` is
a value (not a registry filled at import time) so a codec can be built with other steps.
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


RELEASED = Upcasters()
