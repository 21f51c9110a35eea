"""The target bundle (docs/CONTRACT.md §1): locate, load, validate and freeze.

Invariants:
- Every file is parsed into a pydantic model; a bad file raises BundleError whose one-line
  message names the file and the field ("cases.json: [1].weight: must be greater than 0").
- The case dicts reach the harness exactly as the user wrote them; unknown keys of target.json
  are kept and ignored.
- A frozen bundle is a private read-only copy in the run's workspace; the run measures only the
  copy. The sha256 of every file is recorded at freeze time. `check()` re-hashes the copy: a
  difference raises BundleChangedError naming the file (what is measured changed; the run
  stops). The user's originals and kernel are the user's to edit: `live_changes()` names those
  that differ from what was frozen (the loop records them; the winner is then not committed).
- budget.json given with --budget overrides the flags (the TLX agent's precedence); one found in
  the --bundle folder yields to the flags typed on the command line.
- `bundle_digest` (the bundle's identity in measurement keys) covers every file that can change
  what is measured; budget.json is frozen and checked but is not part of the identity.
"""

from __future__ import annotations

import json
import math
import shutil
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from optimizer.bundle.spec import CaseSpec, TargetSpec
from tlxstore.errors import ConfigError, TlxdbError
from tlxstore.events import DEFAULT_THRESHOLDS, Thresholds
from tlxstore.hashing import digest_file, digest_json
from tlxstore.limits import loads_bounded

HARNESS = "harness.py"
CASES = "cases.json"
TARGET = "target.json"
BUDGET = "budget.json"
REFERENCE = "reference_kernel.py"
NOT_IN_IDENTITY = frozenset({BUDGET})
_SKIPPED_PARTS = frozenset({"__pycache__", ".git", ".hg", ".pytest_cache"})


class BundleError(ConfigError):
    """The target bundle is invalid."""


class BundleChangedError(TlxdbError):
    """A bundle file changed during the run; the run stops."""


# ---- file models ----------------------------------------------------------------------------


class CaseEntry(BaseModel):
    """One entry of cases.json. Extra keys are allowed and handed to the harness unchanged."""

    model_config = ConfigDict(extra="allow")

    case_id: str = Field(min_length=1)
    parameters: dict[str, Any] = {}
    weight: float = Field(1.0, gt=0, allow_inf_nan=False)
    protected: bool = True

    @field_validator("case_id")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be blank")
        return v


class TargetFile(BaseModel):
    """target.json. Unknown keys are kept (and ignored by tlxdb)."""

    model_config = ConfigDict(extra="allow")

    backend: Literal["cuda", "hip", "cpu"]
    architecture: str = ""
    device: str = ""
    environment: dict[str, str] = {}
    optimization_guidance: str = ""
    tuning_space: dict[str, list[Any]] | None = None


class BudgetFile(BaseModel):
    """budget.json: values of the budget flags (resolve_thresholds says which wins)."""

    model_config = ConfigDict(extra="forbid")

    max_rounds: int | None = Field(None, gt=0)
    candidates_per_round: int | None = Field(None, gt=0)
    max_candidate_seconds: float | None = Field(None, gt=0, allow_inf_nan=False)
    max_total_seconds: float | None = Field(None, gt=0, allow_inf_nan=False)
    min_speedup: float | None = Field(None, ge=1.0, allow_inf_nan=False)
    max_cv: float | None = Field(None, ge=0, allow_inf_nan=False)  # 0: only constant samples
    benchmark_repetitions: int | None = Field(None, gt=0)
    max_extra_blocks: int | None = Field(None, ge=0)
    strict_noise: bool | None = None
    replicates: int | None = Field(None, gt=0)
    replicate_tolerance: float | None = Field(None, ge=0, allow_inf_nan=False)
    history_seeds: int | None = Field(None, ge=0)


def _one_line(file: str, err: ValidationError, prefix: str = "") -> str:
    first = err.errors()[0]
    loc = prefix + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"])
    loc = loc.lstrip(".")
    msg = first["msg"]
    msg = msg[0].lower() + msg[1:] if msg else msg
    got = first.get("input")
    shown = f" (got {json.dumps(got, default=str)})" if first["type"] != "missing" else ""
    if isinstance(got, dict | list):
        shown = ""
    more = f" (and {len(err.errors()) - 1} more)" if len(err.errors()) > 1 else ""
    where = f"{loc}: " if loc else ""
    return f"{file}: {where}{msg}{shown}{more}"


def _read_json(path: Path, name: str) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise BundleError(
            f"cannot read {name} at {path}: {getattr(e, 'strerror', None) or e}"
        ) from None
    try:
        return loads_bounded(text, name)  # nested deeper than MAX_JSON_DEPTH: one line
    except json.JSONDecodeError as e:
        raise BundleError(
            f"{name}: not valid JSON: {e.msg} at line {e.lineno} column {e.colno}"
        ) from None


def parse_cases(data: Any, name: str = CASES) -> list[CaseEntry]:
    if not isinstance(data, list):
        raise BundleError(f"{name}: must be a list of cases, got a JSON {type(data).__name__}")
    if not data:
        raise BundleError(f"{name}: must hold at least one case")
    cases: list[CaseEntry] = []
    for i, item in enumerate(data):
        try:
            cases.append(CaseEntry.model_validate(item, strict=True))  # "2", "no": refused
        except ValidationError as e:
            raise BundleError(_one_line(name, e, prefix=f"[{i}]")) from None
    seen: set[str] = set()
    for i, c in enumerate(cases):
        if c.case_id in seen:
            raise BundleError(f"{name}: [{i}].case_id: duplicate case_id {c.case_id!r}")
        seen.add(c.case_id)
    return cases


def parse_target(data: Any, name: str = TARGET) -> TargetFile:
    if not isinstance(data, dict):
        raise BundleError(f"{name}: must be a JSON object, got a JSON {type(data).__name__}")
    try:
        return TargetFile.model_validate(data)
    except ValidationError as e:
        raise BundleError(_one_line(name, e)) from None


def parse_budget(data: Any, name: str = BUDGET) -> BudgetFile:
    if not isinstance(data, dict):
        raise BundleError(f"{name}: must be a JSON object, got a JSON {type(data).__name__}")
    try:
        return BudgetFile.model_validate(data, strict=True)  # "5", true: refused
    except ValidationError as e:
        raise BundleError(_one_line(name, e)) from None


# ---- locating and loading -------------------------------------------------------------------


class BundlePaths(BaseModel):
    """Where the user's bundle files are (absolute paths)."""

    model_config = ConfigDict(frozen=True)

    root: Path | None  # the bundle folder, when given as --bundle
    harness: Path
    cases: Path
    target: Path
    budget: Path | None = None
    budget_explicit: bool = False  # given as --budget: it wins over the flags; else they win
    reference: Path | None = None

    def named(self) -> dict[str, Path]:
        """Canonical bundle name -> the user's file, for the files given explicitly."""
        out = {HARNESS: self.harness, CASES: self.cases, TARGET: self.target}
        if self.budget is not None:
            out[BUDGET] = self.budget
        if self.reference is not None:
            out[REFERENCE] = self.reference
        return out


def locate(
    bundle_dir: Path | None = None,
    *,
    harness: Path | None = None,
    cases: Path | None = None,
    target: Path | None = None,
    budget: Path | None = None,
    reference: Path | None = None,
) -> BundlePaths:
    """Resolve --bundle DIR or --harness/--cases/--target (plus optional --budget/--reference-kernel)."""
    explicit = {"--harness": harness, "--cases": cases, "--target": target}
    budget_explicit = budget is not None
    if bundle_dir is not None:
        given = [flag for flag, p in explicit.items() if p is not None]
        if given:
            raise BundleError(f"give either --bundle or {', '.join(given)}, not both")
        root = Path(bundle_dir).resolve()
        if not root.is_dir():
            raise BundleError(f"bundle folder {bundle_dir} does not exist")
        harness, cases, target = root / HARNESS, root / CASES, root / TARGET
        if budget is None and (root / BUDGET).exists():
            budget = root / BUDGET
        if reference is None and (root / REFERENCE).exists():
            reference = root / REFERENCE
    else:
        missing = [flag for flag, p in explicit.items() if p is None]
        if len(missing) == 3:
            raise BundleError(
                "no bundle given: pass --bundle DIR or --harness, --cases and --target"
            )
        if missing:
            raise BundleError(f"missing {', '.join(missing)} (or pass --bundle DIR)")
        root = None
    paths = BundlePaths(
        root=root,
        harness=Path(harness).resolve(),  # type: ignore[arg-type]
        cases=Path(cases).resolve(),  # type: ignore[arg-type]
        target=Path(target).resolve(),  # type: ignore[arg-type]
        budget=Path(budget).resolve() if budget is not None else None,
        budget_explicit=budget_explicit,
        reference=Path(reference).resolve() if reference is not None else None,
    )
    for name, p in paths.named().items():
        if not p.is_file():
            raise BundleError(f"{name} not found at {p}")
    return paths


class Bundle(BaseModel):
    """A loaded, validated bundle (not yet frozen)."""

    model_config = ConfigDict(frozen=True)

    paths: BundlePaths
    cases: list[CaseSpec]
    raw_cases: list[dict[str, Any]]
    target: TargetFile
    raw_target: dict[str, Any]
    budget: BudgetFile | None = None
    reference_source: str | None = None

    @property
    def target_spec(self) -> TargetSpec:
        t = self.target
        return TargetSpec(
            backend=t.backend,
            architecture=t.architecture,
            device=t.device,
            optimization_guidance=t.optimization_guidance,
            tuning_space=t.tuning_space,
        )

    @property
    def weights(self) -> dict[str, float]:
        return {c.case_id: c.weight for c in self.cases}


def _read_text(path: Path, name: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise BundleError(
            f"cannot read {name} at {path}: {getattr(e, 'strerror', None) or e}"
        ) from None


def load(paths: BundlePaths) -> Bundle:
    """Read and validate cases.json, target.json, budget.json and the reference kernel."""
    entries = parse_cases(_read_json(paths.cases, CASES))
    raw_target = _read_json(paths.target, TARGET)
    target = parse_target(raw_target)
    budget = parse_budget(_read_json(paths.budget, BUDGET)) if paths.budget else None
    _read_text(paths.harness, HARNESS)
    reference = _read_text(paths.reference, REFERENCE) if paths.reference else None
    return Bundle(
        paths=paths,
        cases=[
            CaseSpec(
                case_id=c.case_id, parameters=c.parameters, weight=c.weight, protected=c.protected
            )
            for c in entries
        ],
        raw_cases=[c.model_dump() for c in entries],
        target=target,
        raw_target=raw_target,
        budget=budget,
        reference_source=reference,
    )


def read_kernel(path: Path) -> str:
    """The user's kernel: one complete Python source file that parses."""
    p = Path(path)
    if p.is_dir():
        raise BundleError(f"kernel {p} is a directory; give --kernel one Python file")
    if not p.is_file():
        raise BundleError(f"kernel not found at {p}")
    text = _read_text(p, "kernel")
    try:
        compile(text, str(p), "exec")
    except SyntaxError as e:
        raise BundleError(
            f"kernel {p.name} has a syntax error at line {e.lineno}: {e.msg}"
        ) from None
    return text


# The budget flags' defaults: tlxdb's (the TLX agent's budget, promotion on the interval for a noisy case).
FLAG_DEFAULTS: dict[str, float | int] = DEFAULT_THRESHOLDS.model_dump()


def _flag(name: str) -> str:
    return f"--{name.replace('_', '-')}"


def check_flags(flags: Mapping[str, float | int | None]) -> None:
    """Refuse (BundleError, one line naming the flag) a budget flag given a value that is not a
    finite number within its bounds, each flag on its own: whether budget.json overrides it
    or not, an invalid value given on the command line is an error."""
    for name, value in flags.items():
        if value is None or name not in FLAG_DEFAULTS:
            continue
        if isinstance(value, float) and not math.isfinite(value):
            raise BundleError(f"{_flag(name)} must be a finite number, got {value:g}")
        try:
            Thresholds.model_validate({**FLAG_DEFAULTS, name: value})
        except ValidationError:
            bound = _BOUNDS.get(name, "must be greater than 0")
            raise BundleError(f"{_flag(name)} {bound} (got {value})") from None


def budget_overrides(flags: dict[str, float | int | None], paths: BundlePaths) -> list[str]:
    """One line for each flag given on the command line whose value budget.json disagrees
    with, saying which wins (resolve_thresholds): a --budget file overrides the flag, so a user
    is not left wondering why --max-rounds 3 ran twelve rounds; the flag overrides a budget.json
    found in the bundle folder, which a TLX user may expect to win. Reads budget.json; its errors
    are the bundle's. The flags are checked first (check_flags): an invalid one is refused, not
    overridden."""
    check_flags(flags)
    if paths.budget is None:
        return []
    budget = parse_budget(_read_json(paths.budget, BUDGET)).model_dump(exclude_none=True)
    differ = [n for n in budget if flags.get(n) is not None and flags[n] != budget[n]]
    if paths.budget_explicit:
        return [
            f"{_flag(n)} {flags[n]:g} is overridden by {BUDGET} ({n} {budget[n]:g})" for n in differ
        ]
    return [
        f"{_flag(n)} {flags[n]:g} overrides the bundle's {BUDGET} ({n} {budget[n]:g}); "
        "give the file with --budget for it to win"
        for n in differ
    ]


def resolve_thresholds(
    flags: dict[str, float | int | None], budget: BudgetFile | None, *, budget_wins: bool
) -> Thresholds:
    """The defaults, budget.json and the flags given (None: not given), in the order of
    docs/CONTRACT.md: with `budget_wins` (a file given with --budget, as in the TLX agent)
    budget.json's values override the flags; without (a budget.json found in the bundle folder)
    a flag the user typed overrides the file."""
    check_flags(flags)  # each flag on its own, whichever wins
    given = {k: v for k, v in flags.items() if k in FLAG_DEFAULTS and v is not None}
    from_file = budget.model_dump(exclude_none=True) if budget is not None else {}
    # budget.json's own bounds hold (BudgetFile)
    layers = (given, from_file) if budget_wins else (from_file, given)
    return Thresholds.model_validate({**FLAG_DEFAULTS, **layers[0], **layers[1]})


_BOUNDS = {
    "min_speedup": "must be at least 1",
    "max_cv": "must not be negative",
    "max_extra_blocks": "must not be negative",
    "replicate_tolerance": "must not be negative",
    "history_seeds": "must not be negative",
}
"""Each threshold's bound where it is not "greater than 0" (max_cv 0 admits only constant
samples, as in the TLX agent)."""


# ---- freezing -------------------------------------------------------------------------------


def _bundle_files(paths: BundlePaths) -> dict[str, Path]:
    """Every file that makes up the bundle, by its name inside the frozen copy."""
    files: dict[str, Path] = {}
    if paths.root is not None:
        for p in sorted(paths.root.rglob("*")):
            rel = p.relative_to(paths.root)
            if p.is_file() and not (set(rel.parts) & _SKIPPED_PARTS) and p.suffix != ".pyc":
                files[rel.as_posix()] = p
    files.update(paths.named())  # explicit --budget/--reference-kernel win over the folder's
    return files


class FrozenBundle:
    """A private, read-only copy of the bundle and the hashes that pin it."""

    def __init__(self, bundle: Bundle, kernel_path: Path, copy_root: Path) -> None:
        self.bundle = bundle
        self.kernel_path = Path(kernel_path).resolve()
        self.root = copy_root
        sources = _bundle_files(bundle.paths)
        self._originals = sources
        copy_root.mkdir(parents=True, exist_ok=False)
        for name, src in sources.items():
            dst = copy_root / name
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
        self.files: dict[str, str] = {name: digest_file(src) for name, src in sources.items()}
        for name in sources:
            if digest_file(copy_root / name) != self.files[name]:
                raise BundleChangedError(f"{name} changed while it was being copied; try again")
        self.kernel_sha256 = digest_file(self.kernel_path)
        self.bundle_digest = digest_json(
            {k: v for k, v in self.files.items() if k not in NOT_IN_IDENTITY}
        )
        _make_read_only(copy_root)

    def check(self) -> None:
        """Raise BundleChangedError if a file of the private copy (what the run measures with)
        changed."""
        for path, label in self.watched.items():
            if _digest(path) != self.files[path.relative_to(self.root).as_posix()]:
                raise BundleChangedError(f"{label} changed during the run ({path}); the run stops")

    @property
    def watched(self) -> dict[Path, str]:
        """The private copy's files, with how a message names them (hashed around every
        proposal, optimizer.run.loop: a change there stops the run)."""
        return {self.root / name: f"the private copy of {name}" for name in self.files}

    def live_changes(self, kernel_sha256: str | None = None) -> list[tuple[Path, str]]:
        """The user's files that differ from what was frozen (changed, or gone), each with how a
        message names it: the kernel (against `kernel_sha256`, the hash the run started from,
        else the one read at freeze time) and the bundle's originals. The run measures its copy
        and the baseline it recorded, so these never reach a measurement."""
        want = {self.kernel_path: kernel_sha256 or self.kernel_sha256}
        want |= {self._originals[name]: digest for name, digest in self.files.items()}
        labels = {path: name for name, path in self._originals.items()}
        labels[self.kernel_path] = f"the kernel {self.kernel_path.name}"
        return [(path, labels[path]) for path, digest in want.items() if _digest(path) != digest]


def _digest(path: Path) -> str | None:
    try:
        return digest_file(path)
    except OSError:
        return None


def _make_read_only(root: Path) -> None:
    ro_file = stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH
    for p in sorted(root.rglob("*"), reverse=True):
        p.chmod(ro_file | (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH if p.is_dir() else 0))
    root.chmod(ro_file | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
