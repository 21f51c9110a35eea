"""Copies of the vecadd fixture bundle with one thing changed, for bad-input tests."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
KERNEL = FIXTURES / "vecadd_kernel.py"
# A command agent (--provider command) that makes the vecadd kernel's one faster candidate.
BLOCK_AGENT = """
import json, pathlib, sys
sys.stdin.read()
p = pathlib.Path("candidate.py")
p.write_text(p.read_text().replace("BLOCK_SIZE = 64", "BLOCK_SIZE = 1024"))
pathlib.Path("candidate_metadata.json").write_text(json.dumps({
    "hypothesis": "the interpreter pays per program; 16x fewer programs",
    "evidence": "vecadd is launch-bound on the interpreter",
    "change": "BLOCK_SIZE 64 -> 1024",
    "hypothesis_kind": "launch_config",
    "commit_title": "Use 1024-element blocks",
}))
"""


def vecadd_bundle(
    dest: Path,
    *,
    harness_append: str = "",
    replace: tuple[str, str] | None = None,
    cases: list | None = None,
    budget: dict | None = None,
) -> Path:
    """A copy of tests/fixtures/vecadd_bundle; `harness_append` is added to harness.py (so it can
    redefine a function), `replace` edits it in place."""
    return _copy("vecadd_bundle", dest, harness_append, replace, cases, budget)


def _copy(
    fixture: str,
    dest: Path,
    harness_append: str = "",
    replace: tuple[str, str] | None = None,
    cases: list | None = None,
    budget: dict | None = None,
    environment: dict[str, str] | None = None,
) -> Path:
    root = Path(shutil.copytree(FIXTURES / fixture, dest))
    harness = root / "harness.py"
    text = harness.read_text()
    if replace is not None:
        assert replace[0] in text, replace[0]
        text = text.replace(*replace)
    harness.write_text(text + harness_append)
    if cases is not None:
        (root / "cases.json").write_text(json.dumps(cases))
    if budget is not None:
        (root / "budget.json").write_text(json.dumps(budget))
    if environment:
        target = json.loads((root / "target.json").read_text())
        target["environment"] = {**target.get("environment", {}), **environment}
        (root / "target.json").write_text(json.dumps(target))
    return root


def kernel_copy(dest_dir: Path, text: str | None = None) -> Path:
    dest_dir.mkdir(parents=True, exist_ok=True)
    k = dest_dir / "vecadd_kernel.py"
    k.write_text(KERNEL.read_text() if text is None else text)
    return k


def sleep_bundle(
    dest: Path,
    *,
    sleep_s: float | None = None,
    cases: list | None = None,
    harness_append: str = "",
) -> Path:
    """A copy of tests/fixtures/sleep_bundle: real builds and verifications of the vecadd kernel,
    a benchmark that sleeps a fixed time (`sleep_s`, default the harness's) and returns samples
    fixed by BLOCK_SIZE. Tests whose assertions follow from decisions use it so that a busy
    machine cannot change a decision."""
    env = None if sleep_s is None else {"SLEEP_HARNESS_S": str(sleep_s)}
    return _copy("sleep_bundle", dest, harness_append, cases=cases, environment=env)


VECADD_CASES = json.loads((FIXTURES / "vecadd_bundle" / "cases.json").read_text())
