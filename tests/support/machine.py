"""The machine-state fixtures (tests/fixtures/machine/README.md) and runs built around them.

`state(kind)` picks a recorded MachineSampled payload by what it shows, read from its raw fields
(never through the rule under test): "quiet" (no reason but gpu_idle, no neighbour), "capped"
(the software power cap alone), "degrading" (a hardware slowdown, thermal slowdown or the power
brake), "shared" (another process on the GPU).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support.bundles import FIXTURES
from tlxstore.events import (
    BASELINE_ID,
    BenchmarkSampled,
    BuildFinished,
    CandidateProposed,
    CaseVerified,
    Event,
    MachineSampled,
    Phase,
    ProfileCollected,
    ProfileMetric,
    SourceStored,
    Thresholds,
)
from tlxstore.hashing import digest_text
from tlxstore.testing import run_started

MACHINE = FIXTURES / "machine"
NVML_TRACE = MACHINE / "nvml_trace.json"
STATES = MACHINE / "machine_states.jsonl"
_SLOWING = {"hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"}

T = Thresholds(
    max_rounds=1,
    candidates_per_round=1,
    max_candidate_seconds=600,
    max_total_seconds=3600,
    min_speedup=1.01,
    max_cv=0.1,
    benchmark_repetitions=4,
)


def _kind(s: dict[str, Any]) -> str:
    reasons = {r for r, n in s["reasons"].items() if n}
    if s["neighbours"]:
        return "shared"
    if reasons & _SLOWING:
        return "degrading"
    if reasons - {"gpu_idle"} == {"sw_power_cap"}:
        return "capped"
    return "quiet" if not reasons - {"gpu_idle"} else "other"


def states() -> list[dict[str, Any]]:
    return [json.loads(line)["state"] for line in STATES.read_text().splitlines() if line.strip()]


def state(kind: str) -> dict[str, Any]:
    """The first recorded state of a kind."""
    return next(s for s in states() if _kind(s) == kind)


def source(block: int) -> str:
    return (
        f"import triton\n\nBLOCK_SIZE = {block}\n\n\n@triton.jit\n"
        "def decode_kernel(x_ptr, n):\n    pass\n"
    )


def proposal(cid: str, block: int) -> list[Event]:
    text = source(block)
    return [
        SourceStored(
            source_hash=digest_text(text),
            normalized_hash=digest_text("n" + text),
            text=text,
            size_bytes=len(text),
        ),
        CandidateProposed(
            candidate_id=cid,
            parent_id=None if cid == BASELINE_ID else BASELINE_ID,
            round=0 if cid == BASELINE_ID else 1,
            provider="baseline" if cid == BASELINE_ID else "tune",
            hypothesis="the kernel as given" if cid == BASELINE_ID else "wider blocks",
            source_hash=digest_text(text),
            normalized_hash=digest_text("n" + text),
            knobs={} if cid == BASELINE_ID else {"BLOCK_SIZE": block},
        ),
        BuildFinished(candidate_id=cid, success=True, duration_ms=10.0),
    ]


def verified(cid: str, cases: tuple[str, ...], phase: Phase = Phase.ROUND) -> list[Event]:
    return [
        CaseVerified(candidate_id=cid, case_id=c, passed=True, phase=phase, attempt=a)
        for c in cases
        for a in (1, 2)
    ]


def call(
    cid: str,
    case: str,
    window: str,
    block: int,
    samples: list[float],
    kind: str = "quiet",
    phase: Phase = Phase.ROUND,
    instance: int = 1,
) -> list[Event]:
    """One harness benchmark call in a window (of the member's `instance`-th build there) and
    the machine's state while it ran."""
    return [
        BenchmarkSampled(
            candidate_id=cid,
            case_id=case,
            phase=phase,
            block=block,
            window_id=window,
            instance=instance,
            samples_us=samples,
        ),
        MachineSampled(
            candidate_id=cid,
            case_id=case,
            phase=phase,
            window_id=window,
            block=block,
            instance=instance,
            **state(kind),
        ),
    ]


def attribution(cid: str, case: str, kernels: dict[str, tuple[float, int]]) -> ProfileCollected:
    """tlxdb's launch attribution of one case as Proton reports it (optimizer.evaluation
    .attribution.attribution_event): `kernels` maps each kernel the harness call ran to its time
    over all its launches (us) and its launches, the main kernel first."""
    main = next(iter(kernels))
    metrics = [
        ProfileMetric(
            name="main_kernel_time_us",
            value=kernels[main][0] / kernels[main][1],
            unit="us",
            source="proton",
        ),
        ProfileMetric(
            name="kernel_time_us",
            value=sum(t for t, _ in kernels.values()),
            unit="us",
            source="proton",
        ),
    ]
    for name, (time_us, launches) in kernels.items():
        metrics.append(
            ProfileMetric(name=f"kernel_time_us:{name}", value=time_us, unit="us", source="proton")
        )
        metrics.append(
            ProfileMetric(
                name=f"kernel_launches:{name}", value=float(launches), unit="count", source="proton"
            )
        )
    return ProfileCollected(
        candidate_id=cid, case_id=case, metrics=metrics, kernel_names=list(kernels)
    )


def started(thresholds: Thresholds = T, cases: tuple[str, ...] = ("decode",)) -> list[Event]:
    """RunStarted (a CPU run's: the device enters no decision), the baseline proposed and
    validated."""
    begin = run_started().model_copy(
        update={
            "thresholds": thresholds,
            "case_weights": dict.fromkeys(cases, 1.0),
            "protected_cases": list(cases),
        }
    )
    base: list[Event] = [
        *proposal(BASELINE_ID, 64),
        *verified(BASELINE_ID, cases, Phase.VALIDATION),
    ]
    for case in cases:
        base += call(BASELINE_ID, case, BASELINE_ID, 0, [100.0, 100.2], phase=Phase.VALIDATION)
    return [begin, *base]


def write_log(path: Path, run_id: str, events: list[Event]) -> Path:
    """A run log of `events` (an output folder's events.jsonl), as a run writes one."""
    from tlxstore.runlog import RunLog

    log = RunLog.create(path, run_id)
    log.append(events)
    return path
