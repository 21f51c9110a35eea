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
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

from tlxstore.errors import ImportFormatError
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

EXPERIMENTS = "experiments.json"
DEVICE_KIND = "unknown (TLX agent import)"
PROVIDER = "tlx-agent"
_OUTCOMES = {
    "baseline": Outcome.PROMOTED,
    "promoted": Outcome.PROMOTED,
    "rejected": Outcome.REJECTED,
    "failed": Outcome.FAILED,
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


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


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
        raw = exp_path.read_bytes()
        items = json.loads(raw)
    except FileNotFoundError:
        raise ImportFormatError(
            f"{folder} has no {EXPERIMENTS}; it is not a TLX agent output folder"
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ImportFormatError(f"{exp_path} is not readable JSON: {exc}") from None
    if not isinstance(items, list) or not items:
        raise ImportFormatError(f"{exp_path} must hold a non-empty list of experiments")
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


def _read_result(folder: Path) -> dict[str, Any] | None:
    try:
        value = json.loads((folder / "result.json").read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None  # an interrupted TLX run writes no result.json
    return value if isinstance(value, dict) else None


def _run_started(
    folder: Path, run_id: str, raw: bytes, items: list[Any], result: dict[str, Any] | None
) -> RunStarted:
    """Only content, never where the folder lies now: a copy must import as the same run."""
    files = {EXPERIMENTS: digest_bytes(raw)}
    baseline = folder / "experiments" / "baseline" / "kernel.py"
    kernel_sha = digest_bytes(baseline.read_bytes()) if baseline.is_file() else digest_text("")
    first = items[0] if isinstance(items[0], dict) else {}
    kernel_path = _text(first.get("source_path"))  # where the TLX agent wrote it
    output_dir = _text((result or {}).get("artifacts_dir")) or str(
        Path(kernel_path).parent.parent.parent
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
    if not isinstance(item, dict):
        raise ImportFormatError(f"{exp_path}: experiment {index} is not an object")
    exp_id = item.get("experiment_id")
    if not isinstance(exp_id, str) or not _SAFE_ID.fullmatch(exp_id):
        raise ImportFormatError(f"{exp_path}: experiment {index} has no usable experiment_id")
    status = _text(item.get("status"))
    if status not in _OUTCOMES:
        raise ImportFormatError(f"{exp_path}: experiment {exp_id} has unknown status {status!r}")
    source_file = folder / "experiments" / exp_id / "kernel.py"
    source = (
        source_file.read_text(encoding="utf-8", errors="replace") if source_file.is_file() else ""
    )
    raw_hash, norm_hash = digest_text(source), digest_text(normalize(source))
    out: list[Event] = []
    if raw_hash not in seen_sources:
        seen_sources.add(raw_hash)
        out.append(
            SourceStored(
                source_hash=raw_hash,
                normalized_hash=norm_hash,
                text=source,
                size_bytes=len(source.encode()),
            )
        )
    round_index = item.get("round_index")
    out.append(
        CandidateProposed(
            candidate_id=exp_id,
            parent_id=item.get("parent_id") if isinstance(item.get("parent_id"), str) else None,
            round=round_index if isinstance(round_index, int) and round_index >= 0 else 0,
            provider=PROVIDER,
            hypothesis=_text(item.get("hypothesis")),
            evidence=_text(item.get("evidence")),
            change=_text(item.get("mutation_summary")),
            expected_effect=_text(item.get("expected_effect")),
            risk=_text(item.get("risk")),
            commit_title=_text(item.get("commit_title")) or None,
            commit_summary=_text(item.get("commit_summary")) or None,
            source_hash=raw_hash,
            normalized_hash=norm_hash,
        )
    )
    performance = _object(item.get("performance"))
    phase = Phase.VALIDATION if status == "baseline" else Phase.ROUND
    for case in performance.get("cases") or []:
        if not isinstance(case, dict) or not isinstance(case.get("case_id"), str):
            raise ImportFormatError(f"{exp_path}: experiment {exp_id} has a case without case_id")
        verification = _object(case.get("verification"))
        metrics = _object(verification.get("metrics"))
        out.append(
            CaseVerified(
                candidate_id=exp_id,
                case_id=case["case_id"],
                passed=verification.get("passed") is True,
                phase=phase,
                diagnostics=_text(verification.get("diagnostics")),
                metrics={str(k): _number(v) for k, v in metrics.items()},
            )
        )
        timing = case.get("timing")
        if isinstance(timing, dict):
            samples = [_number(s) for s in timing.get("samples_us") or []]
            if samples and all(s is not None and s > 0 for s in samples):
                out.append(
                    BenchmarkSampled(
                        candidate_id=exp_id,
                        case_id=case["case_id"],
                        phase=phase,
                        samples_us=[s for s in samples if s is not None],
                        warmup_count=timing.get("warmup_count")
                        if isinstance(timing.get("warmup_count"), int)
                        else None,
                        cache_policy=_text(timing.get("cache_policy")) or None,
                    )
                )
    speedup = _number(performance.get("aggregate_speedup"))
    out.append(
        DecisionMade(
            candidate_id=exp_id,
            outcome=_OUTCOMES[status],
            reason=_text(item.get("diagnostics")) or f"TLX agent status: {status}",
            speedup=speedup if speedup and speedup > 0 else None,
            compared_to=None
            if status == "baseline"
            else item.get("parent_id")
            if isinstance(item.get("parent_id"), str)
            else None,
        )
    )
    return out


def _run_finished(result: dict[str, Any]) -> RunFinished:
    reason = _text(result.get("stopping_reason"))
    winner = _text(result.get("winner_experiment_id")) or None
    success = result.get("success") is True
    return RunFinished(
        stopping_reason=_STOPPING.get(
            reason, StoppingReason.MAX_ROUNDS if success else StoppingReason.SEARCH_EXHAUSTED
        ),
        success=success,
        winner_id=winner if success else None,
        detail=f"TLX agent stopping_reason: {reason}" if reason else "",
    )
