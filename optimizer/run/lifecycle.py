"""Starting, resuming and validating runs: everything around the loop that is done once.

Invariants:
- Bad input (files, flags, bundle, device, provider) is refused before anything is written; the
  validation (baseline and the negative tests) runs with its log in the private workspace, and
  only a bundle that passes gets an output folder and enters the store. A run that is refused
  leaves nothing behind.
- `target.environment` reaches the harness child processes only.
- A resumed run continues its own log in its own output folder; its bundle must hash as it did
  when the run started.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import shutil
import socket
import sys
from collections.abc import Callable, Mapping
from contextlib import ExitStack, suppress
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

import queries
from importers import import_paths
from importers.tlx_agent import is_tlx_folder
from optimizer.atomic import write_atomic
from optimizer.bundle.device import check_arch, detect_device
from optimizer.bundle.loading import (
    FLAG_DEFAULTS,
    BundleChangedError,
    BundleError,
    BundlePaths,
    FrozenBundle,
    load,
    read_kernel,
    resolve_thresholds,
)
from optimizer.decision.identity import measurement_key, normalized_source, source_hashes
from optimizer.evaluation import window
from optimizer.evaluation.evaluator import Evaluator
from optimizer.evaluation.ncu_child import NcuProfiler
from optimizer.evaluation.requests import HarnessBundle
from optimizer.providers import ProviderOptions, ProviderRegistry, default_provider, registry
from optimizer.providers.base import Provider
from optimizer.reporting.result import RunResult, live_changes
from optimizer.run import devices as run_devices
from optimizer.run import validation
from optimizer.run.devices import DevicePool
from optimizer.run.environment import read_environment
from optimizer.run.folder import OutputFolder
from optimizer.run.lease import left_by_a_killed_validation, run_lease, validation_claim
from optimizer.run.loop import Ceilings, Observer, RunLoop, Setup
from optimizer.run.workspace import Workspace, remove_recorded
from optimizer.vcs import commit as vcs
from optimizer.vcs.commit import VcsSnapshot
from tlxstore.config import StoreRef, settings
from tlxstore.errors import ConfigError
from tlxstore.events import (
    BASELINE_ID,
    BundleValidated,
    CandidateProposed,
    CommitAttempted,
    DeviceInfo,
    DevicesAssigned,
    Envelope,
    Event,
    RunEnvironment,
    RunStarted,
    SourceStored,
    StoppingReason,
    Thresholds,
    ToolVersions,
    ValidationCheck,
    new_run_id,
)
from tlxstore.fold import RunState, fold
from tlxstore.location import open_store
from tlxstore.redaction import Redactor, without_secrets
from tlxstore.runlog import RunLog
from tlxstore.store import Store
from tlxstore.version import tlxdb_version

REQUEST_FILE = "run_request.json"
SNAPSHOT_FILE = "vcs_snapshot.json"
Committer = Callable[[RunState, str], CommitAttempted]


class CommitOptions(BaseModel):
    model_config = ConfigDict(frozen=True)

    enabled: bool = True
    message: str | None = None
    vcs: Literal["auto", "git", "hg"] = "auto"


class RunRequest(BaseModel):
    """What `tlxdb optimize` was asked to do (written to the output folder for --resume)."""

    model_config = ConfigDict(frozen=True)

    kernel: Path
    bundle: BundlePaths
    store: StoreRef  # a DuckDB file's path or a team store's URL
    output_dir: Path | None = None
    flags: dict[str, float | int | None] = {}
    provider: str | None = None
    provider_options: ProviderOptions = ProviderOptions()
    prior_runs: list[str] = []
    commit: CommitOptions = CommitOptions()
    arch: str | None = None
    argv: list[str] = []
    label: str | None = None
    strict_validation: bool = False  # warnings of the bundle's validation become failures
    devices: str | None = None  # --devices: "all" or "0,1,3"; None: one candidate at a time

    @property
    def provider_name(self) -> str:
        return self.provider or default_provider(self.provider_options.model)


class NotResumableError(ConfigError):
    """The run cannot be resumed."""


# What a resumed run takes from its own start record, never from the resuming command.
RESUME_FIXED_SETTINGS = (
    "kernel",
    "bundle",
    "harness",
    "cases",
    "target",
    "output_dir",
    "provider",
    "model",
    "api_base",
    "prior_run",
    "devices",
    *FLAG_DEFAULTS,
)


def refuse_resume_overrides(given: Mapping[str, object]) -> None:
    """A resumed run continues with its own settings: refuses (ConfigError, naming them as flags)
    each of RESUME_FIXED_SETTINGS given a value (not None, not empty) in `given`."""
    clash = [
        f"--{name.replace('_', '-')}"
        for name in RESUME_FIXED_SETTINGS
        if given.get(name) not in (None, (), [])
    ]
    if clash:
        raise ConfigError(
            f"--resume continues with the run's own settings; drop {', '.join(clash)}"
        )


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def tool_versions() -> ToolVersions:
    return ToolVersions(
        tlxdb=tlxdb_version(),
        python=platform.python_version(),
        triton=_version("triton"),
        torch=_version("torch"),
        duckdb=_version("duckdb"),
    )


def _peaks(device: DeviceInfo) -> tuple[Ceilings, Ceilings]:
    """(hard limits, ceilings): the highest figure of any source, which no correct kernel can
    exceed (the integrity tripwire), and the measured ceiling where there is one (what a kernel
    can reach: the providers' roofline)."""
    from profilers.hardware import Resource, lookup_device

    spec = lookup_device(device.kind)
    resources = (Resource.DRAM_BANDWIDTH, Resource.BF16_DENSE)
    hard = [spec.hard_limit(r) for r in resources]
    reach = [spec.ceiling(r) for r in resources]
    return Ceilings(*(c.value if c else None for c in hard)), Ceilings(
        *(c.value if c else None for c in reach)
    )


@dataclass
class Prepared:
    kernel_source: str
    frozen: FrozenBundle
    thresholds: Thresholds
    device: DeviceInfo
    evaluator: Evaluator
    ceilings: Ceilings
    devices: DevicePool | None = None

    def use_devices(self, spec: str | DevicesAssigned | None) -> None:
        """Evaluate on the devices `--devices spec` names (or a run recorded): the evaluator
        becomes the one pinned to the run's own device."""
        if spec is None:
            return
        target_env = self.frozen.bundle.target.environment
        if isinstance(spec, str):
            python = settings().child_python or sys.executable
            backend = self.frozen.bundle.target.backend
            spec = run_devices.assign(spec, backend, python, os.environ, target_env)
        self.devices = DevicePool.pinned(spec, self.evaluator, {**os.environ, **target_env})
        self.evaluator = self.devices.own


def prepare(
    kernel: Path,
    bundle_paths: BundlePaths,
    flags: dict,
    arch: str | None,
    ws: Workspace,
    thresholds: Thresholds | None = None,
) -> Prepared:
    """Read and check everything, freeze the bundle, find the device: no output yet."""
    source = read_kernel(kernel)
    bundle = load(bundle_paths)
    thresholds = thresholds or resolve_thresholds(
        flags, bundle.budget, budget_wins=bundle_paths.budget_explicit
    )
    frozen = FrozenBundle(bundle, kernel, ws.bundle_dir)
    python = settings().child_python or sys.executable
    device = detect_device(
        bundle.target.backend, bundle.target.environment, python, without_secrets(os.environ)
    )
    check_arch(arch, device, bundle.target.architecture)
    hard, reach = _peaks(device)
    evaluator = Evaluator(
        HarnessBundle.of(frozen),
        python=python,
        peak_bandwidth_bytes_per_s=hard.bandwidth_bytes_per_s,
        peak_flops_per_s=hard.flops_per_s,
        trusted_source=source,
        warm_up_s=0.0 if device.backend == "cpu" else window.GPU_WARM_UP_S,
    )
    return Prepared(source, frozen, thresholds, device, evaluator, reach)


def resolve_prior(store: Store, ref: str) -> list[str]:
    """The run ids a --prior-run names: a run id or prefix, a tlxdb output folder, or a TLX agent
    output folder (imported into the store first; importing twice adds nothing)."""
    p = Path(ref)
    if p.is_dir() and is_tlx_folder(p) and not (p / "events.jsonl").exists():
        return import_paths(store, [p], normalize=normalized_source).paths[0].runs
    return [store.resolve_run(ref)]


def _output_dir(request: RunRequest, store: Store, run_id: str) -> Path:
    out = (request.output_dir or store.runs_dir() / run_id).resolve()
    if out.is_dir() and left_by_a_killed_validation(out):  # half made: it is this run's to use
        for p in out.iterdir():
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise BundleError(f"output folder {out} is not empty; choose another --output-dir")
    return out


def _vcs_snapshot(request: RunRequest, out: Path) -> VcsSnapshot | None:
    """The repository state at run start (kept in the output folder for --resume)."""
    if not request.commit.enabled:
        return None
    saved = out / SNAPSHOT_FILE
    if saved.exists():
        return VcsSnapshot.model_validate_json(saved.read_text())
    snapshot = vcs.snapshot_for_run(request.kernel, request.commit.vcs)
    if snapshot.vcs is None:  # refuse now rather than after an hour of measuring
        raise ConfigError(
            f"cannot commit the winner: {snapshot.detail}; "
            "pass --no-commit-winner to keep the winner in the output folder only"
        )
    return snapshot


def _committer(
    request: RunRequest, prep: Prepared, snapshot: VcsSnapshot | None
) -> Committer | None:
    if snapshot is None:
        return None
    reverify = vcs.harness_reverifier(prep.evaluator, prep.thresholds.max_candidate_seconds)

    def commit(state: RunState, candidate_id: str) -> CommitAttempted:
        """The winner committed, unless a user's file changed during the run: the winner was
        measured against the files as they were, so it is kept in the output folder and the
        repository is not touched (a conflict, as the TLX agent reports one)."""
        changed = live_changes(state)
        if changed:
            return CommitAttempted(
                candidate_id=candidate_id,
                vcs=snapshot.vcs.value if snapshot.vcs else None,
                success=False,
                conflict=True,
                rev_before=snapshot.head,
                kernel_path=str(snapshot.kernel_path),
                diagnostics=f"nothing was committed: {changed[0].detail}",
            )
        return vcs.commit_for_run(
            state, candidate_id, prep.frozen.kernel_path, request.commit.message, snapshot, reverify
        )

    return commit


def _provider(
    request: RunRequest,
    store: Store,
    ws: Workspace,
    given: Provider | None,
    providers: ProviderRegistry,
) -> Provider:
    if given is not None:
        return given
    opts = request.provider_options.model_copy(
        update={
            "store": store.location,
            "workspace": ws.root,
            "kernel_path": request.kernel,
            "remeasure_run": store.resolve_run(request.provider_options.remeasure_run)
            if request.provider_options.remeasure_run
            else None,
        }
    )
    return providers.create(request.provider_name, opts)


def _started(
    request: RunRequest,
    prep: Prepared,
    run_id: str,
    out: Path,
    priors: list[str],
    provider: Provider,
) -> RunStarted:
    tv = tool_versions()
    return RunStarted(
        argv=request.argv,
        host=socket.gethostname(),
        device=prep.device,
        tool_versions=tv,
        thresholds=prep.thresholds,
        provider=provider.name,
        model=provider.model,
        kernel_path=str(prep.frozen.kernel_path),
        kernel_sha256=prep.frozen.kernel_sha256,
        bundle_files=prep.frozen.files,
        bundle_digest=prep.frozen.bundle_digest,
        measurement_key=measurement_key(
            prep.device.kind, tv.triton, tv.torch, prep.frozen.bundle_digest
        ),
        output_dir=str(out),
        prior_runs=priors,
        label=request.label,
        case_weights=prep.frozen.bundle.weights,
        protected_cases=[c.case_id for c in prep.frozen.bundle.cases if c.protected],
        case_parameters={c.case_id: dict(c.parameters) for c in prep.frozen.bundle.cases},
    )


def _environment(prep: Prepared) -> RunEnvironment:
    """The machine the run measures on (its own device's, in a parallel run), read as a harness
    child would see it."""
    python = settings().child_python or sys.executable
    target = prep.frozen.bundle.target
    return read_environment(target.backend, python, {**target.environment, **prep.evaluator.pin})


def _baseline_events(source: str) -> list:
    raw, norm = source_hashes(source)
    return [
        SourceStored(
            source_hash=raw,
            normalized_hash=norm,
            text=source,
            size_bytes=len(source.encode("utf-8")),
        ),
        CandidateProposed(
            candidate_id=BASELINE_ID,
            parent_id=None,
            round=0,
            provider="baseline",
            hypothesis="the kernel as given",
            source_hash=raw,
            normalized_hash=norm,
        ),
    ]


def _setup(
    store: Store,
    prep: Prepared,
    provider: Provider,
    out: Path,
    priors: list[str],
    request: RunRequest,
    observer: Observer | None,
    snapshot: VcsSnapshot | None,
) -> Setup:
    return Setup(
        store=store,
        frozen=prep.frozen,
        evaluator=prep.evaluator,
        ceilings=prep.ceilings,
        provider=provider,
        output=OutputFolder(out),
        thresholds=prep.thresholds,
        prior_runs=[fold(store.run_envelopes(r)) for r in priors],
        commit=_committer(request, prep, snapshot),
        observer=observer,
        ncu=NcuProfiler(prep.evaluator),
        devices=prep.devices,
    )


def optimize(
    request: RunRequest,
    *,
    provider: Provider | None = None,
    providers: ProviderRegistry = registry,
    observer: Observer | None = None,
) -> RunResult:
    """Validate and freeze the bundle, measure the baseline, run the loop; returns the result."""
    read_kernel(request.kernel)  # a kernel that is not one Python file is named as such first
    with Workspace() as ws:
        # a winner that could not be committed is refused before anything is written, the store too
        snapshot = _vcs_snapshot(request, ws.scratch_dir)
        # a damaged or unwritable store is refused before any work
        store = open_store(request.store)
        store.check_writable()
        prep = prepare(request.kernel, request.bundle, request.flags, request.arch, ws)
        prep.use_devices(request.devices)
        queries.persist_views(store)  # a store the run creates holds the views too
        priors = [run_id for ref in request.prior_runs for run_id in resolve_prior(store, ref)]
        run_id = new_run_id()
        out = _output_dir(request, store, run_id)
        prov = _provider(request, store, ws, provider, providers)
        setup = _setup(store, prep, prov, out, priors, request, observer, snapshot)
        log = RunLog.create(ws.scratch_dir / "events.jsonl", run_id, _redactor(prep))
        run = RunLoop(setup, log, [])
        run.append(
            _started(request, prep, run_id, out, priors, prov),
            *([prep.devices.assigned] if prep.devices else []),
            _environment(prep),
            *_baseline_events(prep.kernel_source),
        )
        prep.evaluator.keep_ready = True  # the first candidate's child loads as validation ends
        claim = ExitStack()  # the output folder is claimed until the run's log is in it
        try:
            made = [d for d in (out, *out.parents) if not d.exists()]  # deepest first
            claim.enter_context(validation_claim(out))
            _validate_run(run, prep, out, request.strict_validation, made)
            with run_lease(out, run_id):
                ws.record(out)  # for a resume to remove, should this process be killed
                shutil.move(str(run.log.path), str(setup.output.log_path))
                write_atomic(
                    setup.output.root / REQUEST_FILE, request.model_dump_json(indent=2) + "\n"
                )
                if snapshot is not None:
                    write_atomic(
                        setup.output.root / SNAPSHOT_FILE, snapshot.model_dump_json(indent=2) + "\n"
                    )
                claim.close()  # the run's log and lease hold the folder now
                run.log = RunLog.open(setup.output.log_path, redactor=_redactor(prep))
                run.ingest()
                return _finished(run)
        finally:
            claim.close()
            prep.evaluator.close()


def _finished(run: RunLoop) -> RunResult:
    """Run the loop to its end; the result notes events the store could not take (it stayed
    busy: the run went on on its log, which holds them)."""
    result = run.run()
    if not run.link.behind:
        return result
    note = (
        f"store {run.s.store.location} stayed busy ({run.link.busy}); {run.link.behind} events "
        f"of run {result.run_id} are in its log only: add them with `tlxdb import {result.output_dir}`"
    )
    return result.model_copy(update={"notes": [*result.notes, note]})


def _validate_run(run: RunLoop, prep: Prepared, out: Path, strict: bool, made: list[Path]) -> None:
    """Validate the bundle into the run's log; the baseline's profile artifacts go to the output
    folder (a real per-case artifacts_dir). When validation fails, the output folder is removed
    again if this run made it, with the folders above it that the run made and nothing else
    filled since (the store's `runs/` on a first run), else emptied."""
    try:
        checks = validation.validate(
            prep.evaluator,
            prep.frozen,
            prep.kernel_source,
            prep.thresholds,
            lambda: run.state.candidates[BASELINE_ID],
            run.append,
            OutputFolder(out).artifacts_dir(BASELINE_ID),
            strict=strict,
        )
        passed = all(c.passed for c in checks)
        run.append(BundleValidated(passed=passed, checks=checks, strict=strict))
        if not passed:
            raise validation.ValidationFailedError(validation.failure_message(checks))
    except BaseException:
        if made:
            shutil.rmtree(out, ignore_errors=True)
            for d in made[1:]:
                with suppress(OSError):  # another run's folder is in it now
                    d.rmdir()
        else:  # it was empty
            for p in out.iterdir():
                shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
        raise


def _redactor(prep: Prepared) -> Redactor:
    """What a run's events may not hold: the secrets of tlxdb's environment and of the bundle's
    target environment (which its harness child is given)."""
    return Redactor.from_environment(prep.frozen.bundle.target.environment)


def _locate_run(store: Store, ref: str) -> tuple[str, Path]:
    """(run id, output folder) of a run given by id, prefix or output folder."""
    p = Path(ref)
    if p.is_dir() and (p / "events.jsonl").exists():
        log = RunLog.open(p)
        return log.run_id, p.resolve()
    run_id = store.resolve_run(ref)
    started = fold(store.run_envelopes(run_id)).started
    assert started is not None
    return run_id, Path(started.output_dir)


def _elapsed_s(envelopes: list[Envelope]) -> float:
    times: list[datetime] = [e.recorded_at for e in envelopes]
    return (max(times) - min(times)).total_seconds() if times else 0.0


def resume(
    run_ref: str,
    store_path: StoreRef,
    *,
    provider: Provider | None = None,
    providers: ProviderRegistry = registry,
    observer: Observer | None = None,
    given: Mapping[str, object] | None = None,
) -> RunResult:
    """Continue an interrupted run from its log: nothing decided is redone, nothing is lost.
    `given`: settings the caller was handed besides the run (refuse_resume_overrides)."""
    refuse_resume_overrides(given or {})
    store = open_store(store_path)
    store.check_writable()
    run_id, out = _locate_run(store, run_ref)
    with run_lease(out, run_id):  # before anything is read to be continued
        return _resume_held(store, run_id, out, provider, providers, observer)


def _resume_held(
    store: Store,
    run_id: str,
    out: Path,
    provider: Provider | None,
    providers: ProviderRegistry,
    observer: Observer | None,
) -> RunResult:
    """resume's work, under the run's lease."""
    log = RunLog.open(out / "events.jsonl")
    envelopes = log.envelopes()
    state = fold(envelopes)
    started = state.started
    if started is None or not (out / REQUEST_FILE).exists():
        raise NotResumableError(f"run {run_id} has no start record in {out}; it cannot be resumed")
    fin = state.finished
    if fin is not None and fin.stopping_reason != StoppingReason.INTERRUPTED:
        raise NotResumableError(
            f"run {run_id} already finished ({fin.stopping_reason.value}); start a new run instead"
        )
    # python mode: the store field's validator makes a Path, which JSON mode would refuse
    request = RunRequest.model_validate(json.loads((out / REQUEST_FILE).read_text()))
    remove_recorded(out)  # the workspace of the writer that was killed: it is gone (the lease)
    with Workspace() as ws:
        ws.record(out)
        prep = prepare(
            request.kernel, request.bundle, request.flags, request.arch, ws, started.thresholds
        )
        if prep.frozen.files != started.bundle_files:
            changed = sorted(
                k
                for k in set(prep.frozen.files) | set(started.bundle_files)
                if prep.frozen.files.get(k) != started.bundle_files.get(k)
            )
            raise BundleChangedError(
                f"{changed[0]} changed since run {run_id} started; start a new run"
            )
        if prep.device.kind != started.device.kind:
            raise NotResumableError(
                f"run {run_id} measured on {started.device.kind}, this machine has {prep.device.kind}"
            )
        prep.use_devices(state.devices)  # the devices it recorded, not asked again
        baseline = state.sources[state.candidates[BASELINE_ID].proposal.source_hash].text
        prep.kernel_source = baseline
        log.redactor = _redactor(prep)
        store.ingest(envelopes)
        prov = _provider(request, store, ws, provider, providers)
        setup = _setup(
            store,
            prep,
            prov,
            out,
            list(started.prior_runs),
            request,
            observer,
            _vcs_snapshot(request, out),
        )
        loop = RunLoop(setup, log, envelopes, elapsed_before_s=_elapsed_s(envelopes))
        loop.append(_environment(prep))  # the machine may not be the one it started on
        return _finished(loop)


class ValidationReport(BaseModel):
    model_config = ConfigDict(frozen=True)

    passed: bool
    device: DeviceInfo
    checks: list[ValidationCheck]


def validate_only(
    kernel: Path,
    bundle_paths: BundlePaths,
    flags: dict,
    arch: str | None = None,
    *,
    strict: bool = False,
) -> ValidationReport:
    """docs/CONTRACT.md §1 validation alone: nothing is written anywhere."""
    with Workspace() as ws:
        prep = prepare(kernel, bundle_paths, flags, arch, ws)
        log = RunLog.create(ws.scratch_dir / "events.jsonl", new_run_id())
        state = RunState()

        def emit(*events: Event) -> None:
            for env in log.append(events):
                state.apply(env)

        emit(*_baseline_events(prep.kernel_source))
        checks = validation.validate(
            prep.evaluator,
            prep.frozen,
            prep.kernel_source,
            prep.thresholds,
            lambda: state.candidates[BASELINE_ID],
            emit,
            strict=strict,
        )
        return ValidationReport(
            passed=all(c.passed for c in checks), device=prep.device, checks=checks
        )
