"""What the loop hands the evaluator (the harness child process), and what it gets back.

The evaluator itself is `optimizer.evaluation.evaluator.Evaluator`; its results are events, emitted as they
happen (BuildFinished, CaseVerified, BenchmarkSampled, ProfileCollected, IntegrityFlagged,
InfrastructureFailed). These models are the request side and a small summary, and
HarnessInvalidError the one error it raises (a harness that cannot be used).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from optimizer.bundle.loading import HARNESS, FrozenBundle
from optimizer.bundle.spec import CaseSpec
from tlxstore.errors import TlxdbError
from tlxstore.events import Phase


class HarnessInvalidError(TlxdbError):
    """The harness cannot be used: it lacks build/verify/benchmark or raises when imported."""


class HarnessBundle(BaseModel):
    """A frozen bundle as the evaluator sees it: a private, read-only copy of the user's files."""

    model_config = ConfigDict(frozen=True)

    root: Path  # the private copy: harness.py, cases.json, target.json, [reference_kernel.py]
    harness_file: str = "harness.py"
    cases: list[CaseSpec]
    target: dict[str, Any]  # target.json as the user wrote it; handed to harness.build()
    environment: dict[str, str] = {}  # target.environment, applied to the child only
    protected_paths: list[
        Path
    ] = []  # hashed before and after every evaluation (the copy, the kernel)

    @classmethod
    def of(cls, frozen: FrozenBundle) -> HarnessBundle:
        """The evaluator's view of a frozen bundle: its private copy."""
        b = frozen.bundle
        return cls(
            root=frozen.root,
            harness_file=HARNESS,
            cases=b.cases,
            target=b.raw_target,
            environment=b.target.environment,
            # the copy only: the user's kernel and originals may change under a run
            # (live_changes), which measures neither
            protected_paths=[frozen.root / n for n in frozen.files],
        )


class Reference(BaseModel):
    """A candidate measured beside the one evaluated, in its window (optimizer.evaluation.window):
    the baseline, the incumbent. Its source is built in the same child; it is not verified again."""

    model_config = ConfigDict(frozen=True)

    candidate_id: str
    source: str


class EvalRequest(BaseModel):
    model_config = ConfigDict(frozen=True)

    candidate_id: str
    source: str
    phase: Phase = Phase.ROUND
    repetitions: int  # samples per case and member in the window's first blocks
    references: list[Reference] = []
    max_cv: float | None = None  # a case noisier than this gets extra blocks (None: never)
    max_extra_blocks: int = 0
    timeout_s: float
    verify_repeats: int = 2  # verifications per case before the benchmark (one more after it)
    profile: bool = True
    parent_medians_us: dict[str, float] = {}  # for the >10x-over-parent tripwire
    artifacts_dir: Path | None = None  # raw profile files go here


class EvalSummary(BaseModel):
    """How an evaluation ended. The evidence itself went to `emit` as events."""

    model_config = ConfigDict(frozen=True)

    candidate_id: str
    built: bool
    verified: bool  # every protected case passed every verification
    benchmarked: bool
    blocked_by_guard: bool = False
    infrastructure_failure: bool = False  # retryable: timeout, crash, device fault
    reason: str = ""
