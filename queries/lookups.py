"""The store lookups the loop makes per candidate (dedup, prompt context), typed.

Each runs one statement from statements/ over the store's projection tables (no views), so it
answers in milliseconds on a store of millions of samples (benchmarks/store_bench.py).
"""

from __future__ import annotations

import json
from typing import Any

from queries import statement
from queries.models import Exclusion, MeasuredCandidate, MeasuredMatch
from tlxstore.store import Store


def _rows(store: Store, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    return store.query(statement(name), params).to_pylist()


def _measured(row: dict[str, Any]) -> MeasuredCandidate:
    return MeasuredCandidate(
        run_id=row["run_id"],
        candidate_id=row["candidate_id"],
        source_hash=row["source_hash"],
        knobs=json.loads(row["knobs"]) if row["knobs"] else {},
        outcome=row["outcome"],
        speedup=row["speedup"],
        reason=row["reason"] or "",
        hypothesis=row["hypothesis"] or "",
    )


def find_measured(
    store: Store, measurement_key: str, source_hash: str, normalized_hash: str
) -> MeasuredMatch | None:
    """The earlier decided evaluation of this source under this identity, raw match first."""
    rows = _rows(
        store,
        "find_measured",
        {
            "measurement_key": measurement_key,
            "source_hash": source_hash,
            "normalized_hash": normalized_hash,
        },
    )
    if not rows:
        return None
    r = rows[0]
    return MeasuredMatch(
        run_id=r["run_id"],
        candidate_id=r["candidate_id"],
        source_hash=r["source_hash"],
        match=r["match"],
        outcome=r["outcome"],
        speedup=r["speedup"],
        reason=r["reason"] or "",
    )


def measured_candidates(store: Store, measurement_key: str) -> list[MeasuredCandidate]:
    """Every decided non-baseline candidate under this identity, in any run, oldest first."""
    return [
        _measured(r)
        for r in _rows(store, "measured_candidates", {"measurement_key": measurement_key})
    ]


def exclusions(store: Store, bundle_digest: str, device_kind: str) -> list[Exclusion]:
    """Exclusions for this bundle on this device kind, grouped by signature, most frequent first."""
    rows = _rows(store, "exclusions", {"bundle_digest": bundle_digest, "device_kind": device_kind})
    return [
        Exclusion(
            signature=r["signature"],
            outcome=r["outcome"],
            reason=r["reason"] or "",
            hypothesis=r["hypothesis"] or "",
            occurrences=r["occurrences"],
        )
        for r in rows
    ]


def prior_best(
    store: Store, measurement_key: str, exclude_run: str, limit: int = 10
) -> list[MeasuredCandidate]:
    """Promoted candidates of other runs under this identity, best speedup first (at most `limit`)."""
    rows = _rows(
        store,
        "prior_best",
        {"measurement_key": measurement_key, "exclude_run": exclude_run, "limit": limit},
    )
    return [_measured(r) for r in rows]
