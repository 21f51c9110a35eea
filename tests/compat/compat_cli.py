"""Helpers of the compatibility suite: copies of the bundles and kernels written here, and the
real CLI (click's CliRunner on `cli.main.main`)."""

from __future__ import annotations

import shutil
from pathlib import Path

from click.testing import CliRunner, Result

from cli.main import main
from tlxstore.events import BASELINE_ID
from tlxstore.fold import fold
from tlxstore.store import Store

HERE = Path(__file__).resolve().parent
BUNDLES = HERE / "bundles"
KERNELS = HERE / "kernels"


def bundle(name: str, dest: Path, harness_append: str = "", cases: str | None = None) -> Path:
    root = Path(shutil.copytree(BUNDLES / name, dest / name))
    if harness_append:
        h = root / "harness.py"
        h.write_text(h.read_text() + harness_append)
    if cases is not None:
        (root / "cases.json").write_text(cases)
    return root


def kernel(name: str, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy(KERNELS / name, dest / name))


def invoke(args: list[str]) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def experiments(store: Path, run_id: str) -> dict[str, tuple]:
    """Every experiment of a run as a round trip must keep it: id -> (round, parent, source hash,
    normalized hash, outcome, speedup); the baseline's decision is left out (tlxdb records none,
    the TLX importer one from its "baseline" status)."""
    state = fold(Store(store).run_envelopes(run_id))
    out = {}
    for cid, c in state.candidates.items():
        p, d = c.proposal, None if cid == BASELINE_ID else c.decision
        out[cid] = (
            p.round,
            p.parent_id,
            p.source_hash,
            p.normalized_hash,
            d.outcome if d else None,
            d.speedup if d else None,
        )
    return out


def import_as_tlx(out: Path, dest: Path) -> tuple[Path, str]:
    """A copy of a tlxdb output folder without its events.jsonl (so only the TLX agent's files are
    read), imported through `tlxdb import` into a new store: the store and the imported run id."""
    copy = Path(shutil.copytree(out, dest / "as_tlx"))
    (copy / "events.jsonl").unlink()
    store = dest / "imported.duckdb"
    r = invoke(["import", copy, "--store", store])
    assert r.exit_code == 0, r.stderr
    [run_id] = Store(store).query("SELECT run_id FROM runs").column("run_id").to_pylist()
    return store, run_id
