"""The store lookups the loop makes per candidate (dedup, prompt context), typed.

Dedup (`find_measured`) finds candidate rows by integer keys in a process-local replica
(queries/replica.py): a source never measured (the common case) is answered without touching
the store; a match fetches just its rows. The context lookups run one statement each from
statements/ over the store's single decisions/exclusions tables; `prompt_context` runs the three
in one visit to the store. Timings: benchmarks/store_bench.py.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from queries import statement
from queries.models import Exclusion, MeasuredCandidate, MeasuredMatch
from queries.replica import replica_of
from tlxstore.store import Store

_DEDUP_KEYS = (
    "(source_key = tlx_key($source_hash) OR norm_key = tlx_key($normalized_hash))"
    " AND mk_key = tlx_key($measurement_key)"
)


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


def _exclusion(row: dict[str, Any]) -> Exclusion:
    return Exclusion(
        signature=row["signature"],
        outcome=row["outcome"],
        reason=row["reason"] or "",
        hypothesis=row["hypothesis"] or "",
        occurrences=row["occurrences"],
    )


def find_measured(
    store: Store, measurement_key: str, source_hash: str, normalized_hash: str
) -> MeasuredMatch | None:
    """The earlier decided evaluation of this source under this identity, raw match first."""
    params = {
        "measurement_key": measurement_key,
        "source_hash": source_hash,
        "normalized_hash": normalized_hash,
    }
    rows = replica_of(store).lookup("proj_decisions", _DEDUP_KEYS, "find_measured", params)
    if rows.num_rows == 0:
        return None
    r = rows.to_pylist()[0]
    return MeasuredMatch(
        run_id=r["run_id"],
        candidate_id=r["candidate_id"],
        source_hash=r["source_hash"],
        match=r["match"],
        outcome=r["outcome"],
        speedup=r["speedup"],
        reason=r["reason"] or "",
    )


def _measured_params(measurement_key: str) -> dict[str, Any]:
    return {"measurement_key": measurement_key}


def _exclusion_params(bundle_digest: str, device_kind: str) -> dict[str, Any]:
    return {"bundle_digest": bundle_digest, "device_kind": device_kind}


def _prior_params(measurement_key: str, exclude_run: str, limit: int) -> dict[str, Any]:
    return {"measurement_key": measurement_key, "exclude_run": exclude_run, "limit": limit}


def measured_candidates(store: Store, measurement_key: str) -> list[MeasuredCandidate]:
    """Every decided non-baseline candidate under this identity, in any run, oldest first."""
    table = store.query(statement("measured_candidates"), _measured_params(measurement_key))
    return [_measured(r) for r in table.to_pylist()]


def exclusions(store: Store, bundle_digest: str, device_kind: str) -> list[Exclusion]:
    """Exclusions for this bundle on this device kind, grouped by signature, most frequent first."""
    table = store.query(statement("exclusions"), _exclusion_params(bundle_digest, device_kind))
    return [_exclusion(r) for r in table.to_pylist()]


def prior_best(
    store: Store, measurement_key: str, exclude_run: str, limit: int = 10
) -> list[MeasuredCandidate]:
    """Promoted candidates of other runs under this identity, best speedup first (at most `limit`)."""
    table = store.query(statement("prior_best"), _prior_params(measurement_key, exclude_run, limit))
    return [_measured(r) for r in table.to_pylist()]


def prompt_context(
    store: Store,
    measurement_key: str,
    bundle_digest: str,
    device_kind: str,
    exclude_run: str,
    limit: int = 10,
) -> tuple[list[MeasuredCandidate], list[Exclusion], list[MeasuredCandidate]]:
    """measured_candidates, exclusions and prior_best in one visit to the store."""
    tables: list[pa.Table] = store.query_many(
        [
            (statement("measured_candidates"), _measured_params(measurement_key)),
            (statement("exclusions"), _exclusion_params(bundle_digest, device_kind)),
            (statement("prior_best"), _prior_params(measurement_key, exclude_run, limit)),
        ]
    )
    measured, excluded, best = (t.to_pylist() for t in tables)
    return (
        [_measured(r) for r in measured],
        [_exclusion(r) for r in excluded],
        [_measured(r) for r in best],
    )
