"""Realistic event streams, as the optimizer loop emits them: for tests and benchmarks of every package."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from tlxstore.events import (
    BASELINE_ID,
    TLX_DEFAULT_THRESHOLDS,
    BenchmarkSampled,
    BuildFinished,
    BundleValidated,
    CandidateProposed,
    CaseSpeedup,
    CaseVerified,
    DecisionMade,
    DeviceInfo,
    Envelope,
    Event,
    ExclusionRecorded,
    FailureKind,
    InfrastructureFailed,
    Outcome,
    ProfileCollected,
    ProfileMetric,
    RunFinished,
    RunStarted,
    SourceStored,
    StoppingReason,
    ToolVersions,
)
from tlxstore.hashing import digest_json, digest_text

if TYPE_CHECKING:
    import duckdb

    from tlxstore.store import Store

MEASUREMENT_KEY = digest_json(["cpu-interpreter", "3.9.0", "2.13.0", "sha256:bundle"])


def run_started(output_dir: str = "/tmp/out", measurement_key: str = MEASUREMENT_KEY) -> RunStarted:
    return RunStarted(
        argv=["tlxdb", "optimize", "--kernel", "k.py"],
        host="testhost",
        device=DeviceInfo(kind="cpu-interpreter", backend="cpu"),
        tool_versions=ToolVersions(tlxdb="0.1.0", python="3.11", triton="3.9.0", torch="2.13.0"),
        thresholds=TLX_DEFAULT_THRESHOLDS,
        provider="tune",
        kernel_path="/k/kernel.py",
        kernel_sha256=digest_text("kernel"),
        bundle_files={"harness.py": digest_text("h"), "cases.json": digest_text("c")},
        bundle_digest="sha256:bundle",
        measurement_key=measurement_key,
        output_dir=output_dir,
    )


def candidate_events(
    candidate_id: str,
    source: str,
    round_: int = 1,
    parent_id: str | None = BASELINE_ID,
    cases: tuple[str, ...] = ("small", "large"),
    samples: int = 5,
    base_us: float = 100.0,
    outcome: Outcome = Outcome.REJECTED,
    knobs: dict | None = None,
) -> list[Event]:
    """Source, proposal, build, verify, samples, profile and decision of one candidate."""
    h = digest_text(source)
    nh = digest_text(" ".join(source.split()))
    out: list[Event] = [
        SourceStored(
            source_hash=h, normalized_hash=nh, text=source, size_bytes=len(source.encode())
        ),
        CandidateProposed(
            candidate_id=candidate_id,
            parent_id=parent_id if candidate_id != BASELINE_ID else None,
            round=0 if candidate_id == BASELINE_ID else round_,
            provider="tune",
            hypothesis=f"hypothesis of {candidate_id}",
            source_hash=h,
            normalized_hash=nh,
            knobs=knobs or {},
        ),
        BuildFinished(candidate_id=candidate_id, success=True, duration_ms=12.5),
    ]
    for case in cases:
        out.append(
            CaseVerified(
                candidate_id=candidate_id, case_id=case, passed=True, metrics={"max_abs_error": 0.0}
            )
        )
        out.append(
            BenchmarkSampled(
                candidate_id=candidate_id,
                case_id=case,
                samples_us=[base_us + i * 0.5 for i in range(samples)],
                bytes_moved=1 << 20,
            )
        )
        out.append(
            ProfileCollected(
                candidate_id=candidate_id,
                case_id=case,
                metrics=[
                    ProfileMetric(
                        name="duration_ns", value=base_us * 1000, unit="ns", source="proton"
                    ),
                    ProfileMetric(name="dram_throughput_pct", value=None, unit="%", source="ncu"),
                ],
                kernel_names=["softmax_kernel"],
            )
        )
    speedup = 1.0 if candidate_id == BASELINE_ID else 100.0 / base_us
    out.append(
        DecisionMade(
            candidate_id=candidate_id,
            outcome=Outcome.PROMOTED if candidate_id == BASELINE_ID else outcome,
            reason="baseline" if candidate_id == BASELINE_ID else f"speedup {speedup:.3f}",
            speedup=speedup,
            cases=[
                CaseSpeedup(
                    case_id=c,
                    weight=1.0,
                    baseline_median_us=100.0,
                    candidate_median_us=base_us,
                    speedup=speedup,
                    candidate_cv=0.01,
                )
                for c in cases
            ],
        )
    )
    if outcome in (Outcome.REJECTED, Outcome.FAILED) and candidate_id != BASELINE_ID:
        out.append(
            ExclusionRecorded(
                candidate_id=candidate_id,
                signature=",".join(f"{k}={v}" for k, v in sorted((knobs or {}).items()))
                or candidate_id,
                outcome=outcome,
                reason="not faster",
                hypothesis=f"hypothesis of {candidate_id}",
            )
        )
    return out


def decided(
    candidate_id: str,
    source_hash: str,
    outcome: Outcome,
    speedup: float | None = None,
    ci: tuple[float | None, float | None] = (None, None),
    round_: int = 1,
) -> list[Event]:
    """A candidate's proposal and its decision alone (no samples): what the views that read
    decided speedups need."""
    return [
        CandidateProposed(
            candidate_id=candidate_id,
            parent_id=BASELINE_ID,
            round=round_,
            provider="tune",
            hypothesis="",
            source_hash=source_hash,
            normalized_hash=source_hash,
        ),
        DecisionMade(
            candidate_id=candidate_id,
            outcome=outcome,
            reason=f"decided {outcome.value}",
            speedup=speedup,
            ci_low=ci[0],
            ci_high=ci[1],
        ),
    ]


def cut_short(candidate_id: str, source: str) -> list[Event]:
    """A candidate as the loop records one whose evaluation timed out: source, proposal, the
    retryable infrastructure failure, DecisionMade(failed). It is decided, not measured."""
    return [
        *candidate_events(candidate_id, source)[:2],
        InfrastructureFailed(
            candidate_id=candidate_id, stage="benchmark", kind=FailureKind.TIMEOUT, retryable=True
        ),
        DecisionMade(
            candidate_id=candidate_id, outcome=Outcome.FAILED, reason="timeout during benchmark"
        ),
    ]


def small_run(n_candidates: int = 3, output_dir: str = "/tmp/out", tag: str = "") -> list[Event]:
    """A whole run: start, validation, baseline, candidates, finish."""
    events: list[Event] = [run_started(output_dir), BundleValidated(passed=True, checks=[])]
    events += candidate_events(BASELINE_ID, f"def kernel(): pass  # base {tag}")
    for i in range(1, n_candidates + 1):
        events += candidate_events(
            f"c{i:03d}",
            f"def kernel(): return {i}  # {tag}",
            base_us=100.0 - i,
            outcome=Outcome.PROMOTED if i == n_candidates else Outcome.REJECTED,
            knobs={"BLOCK": 64 * i, "num_warps": 4},
        )
    events.append(
        RunFinished(
            stopping_reason=StoppingReason.MAX_ROUNDS,
            success=True,
            winner_id=f"c{n_candidates:03d}",
        )
    )
    return events


def envelopes(
    run_id: str,
    events: Sequence[Event],
    start: int = 0,
    at: datetime = datetime(2026, 11, 30, 12, tzinfo=UTC),
) -> list[Envelope]:
    """`events` as run `run_id`'s envelopes from seq `start` (ids `<run>-<seq>`), one second apart
    from `at`."""
    return [
        Envelope(
            event_id=f"{run_id}-{start + i}",
            run_id=run_id,
            seq=start + i,
            recorded_at=at + timedelta(seconds=start + i),
            event=e,  # type: ignore[arg-type]  # any event; the union is the same set
        )
        for i, e in enumerate(events)
    ]


def ingest_run(store: Store, run_id: str, events: list[Event]) -> None:
    """Store a run's events as one batch (ids `<run>-<seq>`); runs recorded one after another
    start an hour apart, so their order by time is their order of ingest."""
    store.ingest(
        envelopes(run_id, events, at=datetime(2026, 11, 30, len(store.run_ids()), tzinfo=UTC))
    )


def leave_behind(store: str | Path | duckdb.DuckDBPyConnection) -> int:
    """Turn a store into one an older tlxdb left behind after a bulk ingest: every event stored,
    none projected (an older tlxdb left a batch of 1,000 events or more to the next read).
    `store` is a DuckDB store file, or a connection whose default database is a store (a
    DuckLake's). Returns how many events are behind. For tests of catching up."""
    import duckdb

    con = store if isinstance(store, duckdb.DuckDBPyConnection) else duckdb.connect(str(store))
    try:
        tables = con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() "
            "AND starts_with(table_name, 'proj_')"
        ).fetchall()
        for (table,) in tables:
            con.execute(f'DELETE FROM "{table}"')
        con.execute("UPDATE projection_state SET projected_pos = 0")
        (n,) = con.execute("SELECT next_pos FROM projection_state").fetchone() or (0,)
        return int(n)
    finally:
        if con is not store:
            con.close()


def _as_schema(store_path: Path, version: int, *statements: str) -> None:
    """Run `statements` on a closed store and record it as store schema `version`."""
    import duckdb

    con = duckdb.connect(str(store_path))
    for statement in statements:
        con.execute(statement)
    con.execute(f"UPDATE tlxdb_meta SET value = '{version}' WHERE key = 'store_schema_version'")
    con.close()


V10_KERNEL_NAME = (
    r"regexp_extract(s.text, '@triton\.jit[^\n]*\n(?:[ \t]*@[^\n]*\n)*[ \t]*def[ \t]+"
    r"([A-Za-z_][A-Za-z0-9_]*)', 1)"
)  # what schema v10 named a run's kernel by: the first @triton.jit function of its source


def as_schema_v11(store_path: Path) -> None:
    """Turn a closed store into what tlxdb's store schema v11 wrote: each run's candidate count
    with its baseline among them (for tests of the upgrade to v12)."""
    _as_schema(
        store_path,
        11,
        "UPDATE proj_run_candidates SET candidates = candidates + 1 WHERE run_id IN "
        "(SELECT run_id FROM proj_candidates WHERE candidate_id = 'baseline')",
    )


def as_schema_v10(store_path: Path) -> None:
    """Turn a closed store into what tlxdb's store schema v10 wrote: v11's, and each run's kernel
    the first @triton.jit function of its baseline's source, launched or not (for tests of the
    upgrade to v11)."""
    as_schema_v11(store_path)
    _as_schema(
        store_path,
        10,
        f"UPDATE proj_baselines SET entry_point = {V10_KERNEL_NAME} FROM proj_sources s "
        "WHERE s.source_hash = proj_baselines.source_hash",
    )


def as_schema_v9(store_path: Path) -> None:
    """Turn a closed store into what tlxdb's store schema v9 wrote: v10's, and no instance
    columns on the decisions (for tests and benchmarks of the upgrade to v10)."""
    as_schema_v10(store_path)
    drops = ("instance_df", "instance_sigma", "instance_pairs")
    _as_schema(store_path, 9, *(f"ALTER TABLE proj_decisions DROP COLUMN {c}" for c in drops))


def as_schema_v8(store_path: Path) -> None:
    """Turn a closed store into what tlxdb's store schema v8 wrote: v9's, and no instance column
    on the samples and the machine states (for tests and benchmarks of the upgrade to v9)."""
    as_schema_v9(store_path)
    _as_schema(
        store_path,
        8,
        "ALTER TABLE proj_samples DROP COLUMN instance",
        "ALTER TABLE proj_machine DROP COLUMN instance",
    )
