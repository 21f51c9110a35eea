"""A TLX kernel-optimization agent output folder (experiments.json) as tlxdb events.

The folder holds `experiments.json` (a list of ExperimentSummary objects: experiment_id,
round_index, parent_id, status baseline|promoted|rejected|failed, performance.cases[] with
verification and timing.samples_us, aggregate_speedup, hypothesis, mutation_summary, ...),
`experiments/<id>/kernel.py`, and at the end of a run `result.json`.

The translation is deterministic, so importing the same folder (or a copy of it) twice adds
nothing: the run id is derived from the content of experiments.json, event ids from the run id and
sequence number, and times from the sequence number (the folder records no times, so every
imported event is dated at the Unix epoch plus its seq in microseconds).

What the folder does not record is stated, not guessed: the device kind is "unknown (TLX agent
import)", the thresholds are the TLX agent's defaults, and the measurement key is private to the
import, so its sources are never mistaken for measurements on this machine's identity.

The folder is untrusted input, checked before anything is written (tlxstore/limits.py has the
numbers): its files are read only from itself (a symlink, or a file that is not a regular one, is
refused), its JSON nests at most MAX_JSON_DEPTH levels, experiment ids are unique, rounds and
counts fit the store's 32-bit columns, a case holds at most MAX_SAMPLES_PER_CASE samples, and an
aggregate_speedup is a positive number. A refusal is one line naming the experiment and field.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

from tlxstore.errors import ImportFormatError, TooDeepError
from tlxstore.events import (
    TLX_DEFAULT_THRESHOLDS,
    BenchmarkSampled,
    CandidateProposed,
    CaseVerified,
    DecisionMade,
    DeviceInfo,
    Envelope,
    Event,
    Outcome,
    Phase,
    RunFinished,
    RunStarted,
    SourceStored,
    StoppingReason,
    ToolVersions,
)
from tlxstore.hashing import digest_bytes, digest_json, digest_text
from tlxstore.limits import (
    INT32_MAX,
    MAX_SAMPLES_PER_CASE,
    loads_bounded,
    regular_file_inside,
)

EXPERIMENTS = "experiments.json"
DEVICE_KIND = "unknown (TLX agent import)"
PROVIDER = "tlx-agent"
_OUTCOMES = {
    "baseline": Outcome.PROMOTED,
    "promoted": Outcome.PROMOTED,
    "rejected": Outcome.REJECTED,
    "failed": Outcome.FAILED,
    # newer TLX agents: an ablation that recorded a signal, a proposal stopped for human review;
    # neither was promoted
    "signal_recorded": Outcome.REJECTED,
    "needs_human": Outcome.REJECTED,
}
_STOPPING = {
    "round_budget_exhausted": StoppingReason.MAX_ROUNDS,
    "time_budget_exhausted": StoppingReason.MAX_TOTAL_SECONDS,
}
_SAFE_ID = re.compile(r"^[A-Za-z0-9_.-]{1,80}$")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def is_tlx_folder(path: Path) -> bool:
    return (path / EXPERIMENTS).is_file() if path.is_dir() else path.name == EXPERIMENTS


def _whitespace_normalized(text: str) -> str:
    """The TLX agent's own identity of a source: its non-blank lines, stripped."""
    return "\n".join(line.strip() for line in text.splitlines() if line.strip())


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


class _Fields:
    """Typed reads of one experiment's fields: a value of the wrong type is refused with the
    field named (ImportFormatError), never coerced or dropped. Absent or null means unset."""

    def __init__(self, where: str) -> None:
        self.where = where

    def refuse(self, field: str, want: str, got: Any) -> ImportFormatError:
        return ImportFormatError(
            f"{self.where}: {field} must be {want}, got {json.dumps(got, default=str)[:80]}"
        )

    def text(self, obj: dict[str, Any], key: str, field: str | None = None) -> str:
        value = obj.get(key)
        if value is None or isinstance(value, str):
            return value or ""
        raise self.refuse(field or key, "a string", value)

    def object(self, obj: dict[str, Any], key: str, field: str | None = None) -> dict[str, Any]:
        value = obj.get(key)
        if value is None or isinstance(value, dict):
            return value or {}
        raise self.refuse(field or key, "an object", value)

    def number(self, obj: dict[str, Any], key: str, field: str | None = None) -> float | None:
        value = obj.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.refuse(field or key, "a number", value)
        return float(value) if math.isfinite(value) else None

    def count(self, obj: dict[str, Any], key: str, field: str | None = None) -> int | None:
        """A non-negative integer that fits the store's 32-bit columns."""
        value = obj.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self.refuse(field or key, "a non-negative integer", value)
        if value > INT32_MAX:
            raise self.refuse(field or key, f"at most {INT32_MAX}", value)
        return value

    def speedup(self, obj: dict[str, Any], key: str, field: str) -> float | None:
        """A positive number, 0 (the TLX agent's and tlxdb's TLX writer's placeholder for an
        experiment with no speedup: unset unless it claims a promotion), or unset (absent, null,
        or not finite); a negative one is refused."""
        value = self.number(obj, key, field)
        if value is not None and value < 0:
            raise self.refuse(field, "a positive number", obj.get(key))
        return value

    def flag(self, obj: dict[str, Any], key: str, field: str | None = None) -> bool:
        value = obj.get(key, False)
        if isinstance(value, bool):
            return value
        raise self.refuse(field or key, "true or false", value)

    def samples(self, obj: dict[str, Any], field: str) -> list[float]:
        value = obj.get("samples_us")
        if not isinstance(value, list) or not value:
            raise self.refuse(field, "a non-empty list of microseconds", value)
        if len(value) > MAX_SAMPLES_PER_CASE:
            raise self.refuse(field, f"at most {MAX_SAMPLES_PER_CASE} samples", len(value))
        for s in value:
            if isinstance(s, bool) or not isinstance(s, int | float) or not (0 < s < math.inf):
                raise self.refuse(field, "positive finite numbers", s)
        return [float(s) for s in value]


def events_from_tlx_folder(
    path: str | Path, normalize: Callable[[str], str] = _whitespace_normalized
) -> list[Envelope]:
    """The events of one TLX agent run. `normalize` gives the normalized form of a source
    (tlxdb passes optimizer.decision.identity.normalized_source, so normalized hashes match its own)."""
    folder = Path(path)
    if folder.name == EXPERIMENTS:
        folder = folder.parent
    exp_path = folder / EXPERIMENTS
    try:
        found = regular_file_inside(folder, EXPERIMENTS)
        if found is None:
            raise FileNotFoundError(exp_path)
        raw = found.read_bytes()
        items = loads_bounded(raw, str(exp_path))
    except FileNotFoundError:
        raise ImportFormatError(
            f"{folder} has no {EXPERIMENTS}; it is not a TLX agent output folder"
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ImportFormatError(f"{exp_path} is not readable JSON: {exc}") from None
    if not isinstance(items, list) or not items:
        raise ImportFormatError(f"{exp_path} must hold a non-empty list of experiments")
    _refuse_repeated_ids(exp_path, items)
    run_id = "tlx-" + digest_bytes(raw).split(":", 1)[1][:16]
    result = _read_result(folder)
    events: list[Event] = [_run_started(folder, run_id, raw, items, result)]
    seen_sources: set[str] = set()
    for index, item in enumerate(items):
        events.extend(_experiment_events(folder, exp_path, index, item, normalize, seen_sources))
    if result is not None:
        events.append(_run_finished(result))
    return [
        Envelope(
            event_id=f"{run_id}-{seq:06d}",
            run_id=run_id,
            seq=seq,
            recorded_at=_EPOCH + timedelta(microseconds=seq),
            event=cast(Any, event),  # every element is one of the AnyEvent types
        )
        for seq, event in enumerate(events)
    ]


def _refuse_repeated_ids(exp_path: Path, items: list[Any]) -> None:
    """One experiment per id: a second one with the same id would be two runs' worth of
    evidence under one name (two rows, one decision taken from the other)."""
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        exp_id = item.get("experiment_id") if isinstance(item, dict) else None
        if not isinstance(exp_id, str):
            continue  # refused with its index when its experiment is read
        if exp_id in first:
            raise ImportFormatError(
                f"{exp_path}: experiment {exp_id} appears twice (experiments {first[exp_id]} "
                f"and {index}); an experiment id names one experiment"
            )
        first[exp_id] = index


def _read_file(folder: Path, relative: str) -> bytes | None:
    """A file of the folder, read only from the folder itself (regular_file_inside)."""
    path = regular_file_inside(folder, relative)
    return None if path is None else path.read_bytes()


def _read_result(folder: Path) -> dict[str, Any] | None:
    try:
        raw = _read_file(folder, "result.json")
        value = None if raw is None else loads_bounded(raw, str(folder / "result.json"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, TooDeepError):
        return None  # an interrupted TLX run writes no result.json
    return value if isinstance(value, dict) else None


def _run_started(
    folder: Path, run_id: str, raw: bytes, items: list[Any], result: dict[str, Any] | None
) -> RunStarted:
    """Only content, never where the folder lies now: a copy must import as the same run."""
    files = {EXPERIMENTS: digest_bytes(raw)}
    baseline = _read_file(folder, "experiments/baseline/kernel.py")
    kernel_sha = digest_bytes(baseline) if baseline is not None else digest_text("")
    first = items[0] if isinstance(items[0], dict) else {}
    kernel_path = _text(first.get("source_path"))  # where the TLX agent wrote it
    given = result or {}
    output_dir = (
        _text(given.get("artifacts_dir"))
        or _text(given.get("output_dir"))
        or str(Path(kernel_path).parent.parent.parent)
    )
    return RunStarted(
        argv=["tlx-agent", "(imported)"],
        host="unknown",
        device=DeviceInfo(kind=DEVICE_KIND, backend="cuda"),
        tool_versions=ToolVersions(tlxdb="n/a (TLX agent run)", python="unknown"),
        thresholds=TLX_DEFAULT_THRESHOLDS,
        provider=PROVIDER,
        kernel_path=kernel_path,
        kernel_sha256=kernel_sha,
        bundle_files=files,
        bundle_digest=digest_json(files),
        measurement_key=digest_json({"tlx_agent_import": run_id}),
        output_dir=output_dir,
        label="imported from a TLX agent output folder",
    )


def _experiment_events(
    folder: Path,
    exp_path: Path,
    index: int,
    item: Any,
    normalize: Callable[[str], str],
    seen_sources: set[str],
) -> list[Event]:
    """One experiment: its source, proposal, per-case evidence and decision."""
    if not isinstance(item, dict):
        raise ImportFormatError(f"{exp_path}: experiment {index} is not an object")
    exp_id = item.get("experiment_id")
    if not isinstance(exp_id, str) or not _SAFE_ID.fullmatch(exp_id) or exp_id in (".", ".."):
        raise ImportFormatError(f"{exp_path}: experiment {index} has no usable experiment_id")
    f = _Fields(f"{exp_path}: experiment {exp_id}")
    status = f.text(item, "status")
    if status not in _OUTCOMES:
        raise ImportFormatError(f"{exp_path}: experiment {exp_id} has unknown status {status!r}")
    source_events, proposal = _proposal(folder, exp_id, item, f, normalize, seen_sources)
    phase = Phase.VALIDATION if status == "baseline" else Phase.ROUND
    performance = f.object(item, "performance")
    cases = performance.get("cases")
    if cases is not None and not isinstance(cases, list):
        raise f.refuse("performance.cases", "a list", cases)
    evidence = [e for i, c in enumerate(cases or []) for e in _case_events(exp_id, i, c, f, phase)]
    return [*source_events, proposal, *evidence, _decision(item, status, evidence, f)]


def _proposal(
    folder: Path,
    exp_id: str,
    item: dict[str, Any],
    f: _Fields,
    normalize: Callable[[str], str],
    seen_sources: set[str],
) -> tuple[list[Event], CandidateProposed]:
    """The experiment's source (stored once per content) and its CandidateProposed."""
    data = _read_file(folder, f"experiments/{exp_id}/kernel.py")
    source = "" if data is None else data.decode("utf-8", errors="replace")
    raw_hash, norm_hash = digest_text(source), digest_text(normalize(source))
    stored: list[Event] = []
    if raw_hash not in seen_sources:
        seen_sources.add(raw_hash)
        stored.append(
            SourceStored(
                source_hash=raw_hash,
                normalized_hash=norm_hash,
                text=source,
                size_bytes=len(source.encode()),
            )
        )
    proposal = CandidateProposed(
        candidate_id=exp_id,
        parent_id=f.text(item, "parent_id") or None,
        round=f.count(item, "round_index") or 0,
        provider=PROVIDER,
        hypothesis=f.text(item, "hypothesis"),
        evidence=f.text(item, "evidence"),
        change=f.text(item, "mutation_summary"),
        expected_effect=f.text(item, "expected_effect"),
        risk=f.text(item, "risk"),
        commit_title=f.text(item, "commit_title") or None,
        commit_summary=f.text(item, "commit_summary") or None,
        source_hash=raw_hash,
        normalized_hash=norm_hash,
    )
    return stored, proposal


def _case_events(exp_id: str, i: int, case: Any, f: _Fields, phase: Phase) -> list[Event]:
    """One case of performance.cases: its verification and, when timed, its samples."""
    where = f"performance.cases[{i}]"
    if not isinstance(case, dict) or not isinstance(case.get("case_id"), str):
        raise f.refuse(f"{where}.case_id", "a string", case)
    verification = f.object(case, "verification", f"{where}.verification")
    metrics = f.object(verification, "metrics", f"{where}.verification.metrics")
    out: list[Event] = [
        CaseVerified(
            candidate_id=exp_id,
            case_id=case["case_id"],
            passed=f.flag(verification, "passed", f"{where}.verification.passed"),
            phase=phase,
            diagnostics=f.text(verification, "diagnostics", f"{where}.verification.diagnostics"),
            metrics={
                str(k): f.number(metrics, k, f"{where}.verification.metrics.{k}") for k in metrics
            },
        )
    ]
    timing = f.object(case, "timing", f"{where}.timing")
    if timing:
        out.append(
            BenchmarkSampled(
                candidate_id=exp_id,
                case_id=case["case_id"],
                phase=phase,
                samples_us=f.samples(timing, f"{where}.timing.samples_us"),
                warmup_count=f.count(timing, "warmup_count", f"{where}.timing.warmup_count"),
                cache_policy=f.text(timing, "cache_policy", f"{where}.timing.cache_policy") or None,
            )
        )
    return out


def _decision(item: dict[str, Any], status: str, evidence: list[Event], f: _Fields) -> DecisionMade:
    """The recorded status as a decision, unless the evidence contradicts a promotion: a
    promoted experiment any of whose cases failed verification, or that was never timed, is
    imported as rejected with the reason (naming the failed cases); one whose aggregate_speedup
    is not above 1 is imported as rejected with that speedup."""
    exp_id = str(item["experiment_id"])
    outcome = _OUTCOMES[status]
    reason = f.text(item, "diagnostics") or f"TLX agent status: {status}"
    speedup = f.speedup(f.object(item, "performance"), "aggregate_speedup", "aggregate_speedup")
    if speedup == 0 and status != "promoted":
        speedup = None  # the placeholder of an experiment that has no speedup
    if status == "promoted" and speedup is not None and speedup <= 1:
        outcome = Outcome.REJECTED
        reason = (
            "TLX agent status promoted, contradicted by its evidence: "
            f"aggregate_speedup {speedup:g} is not above 1"
        )
    elif status == "promoted":
        verified = [e for e in evidence if isinstance(e, CaseVerified)]
        failed = list(dict.fromkeys(e.case_id for e in verified if not e.passed))
        timed = any(isinstance(e, BenchmarkSampled) for e in evidence)
        why = (
            "no case passed verification"
            if not any(e.passed for e in verified)
            else f"case{'s' if len(failed) > 1 else ''} {', '.join(failed)} failed verification"
            if failed
            else "no case was timed"
            if not timed
            else ""
        )
        if why:
            outcome = Outcome.REJECTED
            reason = f"TLX agent status promoted, contradicted by its evidence: {why}"
            speedup = None
    return DecisionMade(
        candidate_id=exp_id,
        outcome=outcome,
        reason=reason,
        speedup=speedup,
        compared_to=None if status == "baseline" else f.text(item, "parent_id") or None,
    )


def _run_finished(result: dict[str, Any]) -> RunFinished:
    """The run's end from result.json: the TLX agent's keys, or tlxdb's own (winner_id, its
    stopping reasons) when the folder is a tlxdb output folder read as a TLX one."""
    reason = _text(result.get("stopping_reason"))
    winner = _text(result.get("winner_experiment_id")) or _text(result.get("winner_id")) or None
    success = result.get("success") is True
    known = {r.value: r for r in StoppingReason}
    fallback = StoppingReason.MAX_ROUNDS if success else StoppingReason.SEARCH_EXHAUSTED
    return RunFinished(
        stopping_reason=_STOPPING.get(reason) or known.get(reason, fallback),
        success=success,
        winner_id=winner if success else None,
        detail=f"TLX agent stopping_reason: {reason}" if reason else "",
    )
