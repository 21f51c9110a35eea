"""The store lookups the loop makes per candidate (dedup, prompt context), typed.

Each runs one statement from statements/ over a process-local replica of the store's decisions
and exclusions tables (queries/replica.py), refreshed from the store only when its generation
counter moved: with nothing written since the last lookup, no lookup touches the store.
`prompt_context` runs the three context statements at one generation. Timings:
benchmarks/store_bench.py.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
from pydantic import TypeAdapter

import queries
from queries.models import Exclusion, Figure, MeasuredCandidate, MeasuredMatch, NearestConfig
from queries.replica import replica_of
from tlxstore.store import Store

_MEASURED = TypeAdapter(list[MeasuredCandidate])
_EXCLUSIONS = TypeAdapter(list[Exclusion])
_NEAREST = TypeAdapter(list[NearestConfig])


def _measured(table: pa.Table) -> list[MeasuredCandidate]:
    """Rows of measured_candidates / prior_best as models, validated in one call."""
    return _MEASURED.validate_python(
        [
            {
                **row,
                "knobs": json.loads(row["knobs"]) if row["knobs"] else {},
                "reason": row["reason"] or "",
                "hypothesis": row["hypothesis"] or "",
            }
            for row in table.to_pylist()
        ]
    )


def _exclusions(table: pa.Table) -> list[Exclusion]:
    return _EXCLUSIONS.validate_python(
        [
            {**row, "reason": row["reason"] or "", "hypothesis": row["hypothesis"] or ""}
            for row in table.to_pylist()
        ]
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
    (rows,) = replica_of(store).run(
        [
            (
                "find_measured",
                params,
                "proj_decisions",
                {"source_key": [source_hash], "norm_key": [normalized_hash]},
            )
        ]
    )
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
        ci_low=r["ci_low"],
        ci_high=r["ci_high"],
        reason=r["reason"] or "",
    )


# (statement, params, the table it reads, {key column: texts whose rows it needs})
_Statement = tuple[str, dict[str, Any], str, dict[str, list[str]]]


def _measured_statement(measurement_key: str) -> _Statement:
    return (
        "measured_candidates",
        {"measurement_key": measurement_key},
        "proj_decisions",
        {"mk_key": [measurement_key]},
    )


def _exclusions_statement(bundle_digest: str, device_kind: str) -> _Statement:
    return (
        "exclusions",
        {"bundle_digest": bundle_digest, "device_kind": device_kind},
        "proj_exclusions",
        {"bundle_key": [bundle_digest]},
    )


def _prior_statement(measurement_key: str, exclude_run: str, limit: int) -> _Statement:
    return (
        "prior_best",
        {"measurement_key": measurement_key, "exclude_run": exclude_run, "limit": limit},
        "proj_decisions",
        {"mk_key": [measurement_key]},
    )


def measured_candidates(store: Store, measurement_key: str) -> list[MeasuredCandidate]:
    """Every decided non-baseline candidate under this identity, in any run, oldest first."""
    (table,) = replica_of(store).run([_measured_statement(measurement_key)])
    return _measured(table)


def exclusions(store: Store, bundle_digest: str, device_kind: str) -> list[Exclusion]:
    """Exclusions for this bundle on this device kind, grouped by signature, most frequent first."""
    (table,) = replica_of(store).run([_exclusions_statement(bundle_digest, device_kind)])
    return _exclusions(table)


def prior_best(
    store: Store, measurement_key: str, exclude_run: str, limit: int = 10
) -> list[MeasuredCandidate]:
    """Promoted candidates of other runs under this identity, best speedup first (at most `limit`)."""
    (table,) = replica_of(store).run([_prior_statement(measurement_key, exclude_run, limit)])
    return _measured(table)


def prompt_context(
    store: Store,
    measurement_key: str,
    bundle_digest: str,
    device_kind: str,
    exclude_run: str,
    limit: int = 10,
) -> tuple[list[MeasuredCandidate], list[Exclusion], list[MeasuredCandidate]]:
    """measured_candidates, exclusions and prior_best at one generation of the store (at most
    one visit to it, to refresh the replica)."""
    tables: list[pa.Table] = replica_of(store).run(
        [
            _measured_statement(measurement_key),
            _exclusions_statement(bundle_digest, device_kind),
            _prior_statement(measurement_key, exclude_run, limit),
        ]
    )
    measured, excluded, best = tables
    return _measured(measured), _exclusions(excluded), _measured(best)


def revalidations(store: Store, measurement_key: str) -> dict[tuple[str, str], list[Figure]]:
    """Every final revalidation under this measurement identity, by (run, candidate), oldest
    first (reports/measured_revalidations.sql). A run revalidates once its search is over, so
    the loop reads this once a run, for the runs before it."""
    (rows,) = queries.report(
        store, ["measured_revalidations"], {"measurement_key": measurement_key}
    ).values()
    out: dict[tuple[str, str], list[Figure]] = {}
    for row in rows:
        figure = Figure(speedup=row["speedup"], ci_low=row["ci_low"], ci_high=row["ci_high"])
        out.setdefault((row["run_id"], row["candidate_id"]), []).append(figure)
    return out


def nearest_configs(store: Store, run_id: str, limit: int = 10) -> list[NearestConfig] | None:
    """The configurations other runs promoted for this run's kernel, nearest first (the view
    nearest_history's rows for this run, the first `limit`; read once per run: it pools and
    compares runs, not a per-candidate lookup); None while the store does not hold the run yet.
    Two visits: which runs the first `limit` come from (reports/nearest_reach.sql), then the
    view with its parameters bound to those, so only they and their estimates are read."""
    params: dict[str, Any] = {"run_id": run_id, "limit": limit}
    (reach,) = queries.report(store, ["nearest_reach"], params)["nearest_reach"]
    if not reach["known"]:
        return None
    if not reach["from_runs"]:
        return []
    rows = queries.bound_report(store, "nearest_configs", "nearest_history", params | reach)
    return _NEAREST.validate_python(
        [{**row, "knobs": json.loads(row["knobs"]) if row["knobs"] else {}} for row in rows]
    )
