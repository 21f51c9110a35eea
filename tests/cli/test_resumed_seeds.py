"""A resumed run does not seed again (issue 30's leftover). tune's first proposals of a run are
seeds from the kernel's nearest history (--history-seeds); a run interrupted after its seeds and
continued with `tlxdb optimize --resume` asks a new tune process for the rest, which must not
take the next configuration of the nearest history for another seed. Real `tlxdb optimize` runs
on the Triton interpreter, a real store; the interrupted one in its own process (Ctrl-C reaches
it from its harness)."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.bundles import kernel_copy, sleep_bundle
from support.cli import TLXDB
from support.softmax_runs import run_candidates

from cli.main import main
from queries import lookups
from tlxstore.fold import fold
from tlxstore.runlog import read_envelopes
from tlxstore.store import Store

pytestmark = pytest.mark.slow

# The sleep bundle's harness (its samples fixed by BLOCK_SIZE: the same decisions on a busy
# machine), whose build() interrupts tlxdb (SIGINT to the process that started the harness child:
# Ctrl-C) the first time it is asked to build a second BLOCK_SIZE other than the kernel's own 64,
# that is while the first candidate after the seed is evaluated. Armed once: the state lives
# outside the bundle, whose files must hash the same for --resume.
INTERRUPTING_BUILD = """

import signal as _signal

_STATE = {state!r}
_sleep_build = build


def build(kernel_source, target):
    block = int(re.search(r"^BLOCK_SIZE = (\\d+)", kernel_source, re.M).group(1))
    with open(_STATE) as f:
        state = json.load(f)
    if state["armed"] and block != 64 and block not in state["seen"]:
        state["seen"].append(block)
        state["armed"] = len(state["seen"]) < 2
        with open(_STATE, "w") as f:
            json.dump(state, f)
        if not state["armed"]:
            os.kill(os.getppid(), _signal.SIGINT)
            time.sleep(120)  # tlxdb ends this child as it stops
    return _sleep_build(kernel_source, target)
"""
QUICK = ["--no-commit-winner", "--candidates-per-round", "1", "--benchmark-repetitions", "3"]
QUICK += ["--max-extra-blocks", "0", "--replicates", "1"]


def _ctrl_c_as_in_a_terminal() -> None:
    """tlxdb takes SIGINT as a terminal's Ctrl-C, though the tests run where SIGINT is ignored
    (a job a non-interactive shell sent to the background: its children inherit the ignored
    SIGINT, and Python then installs no KeyboardInterrupt; this test failed so, twice)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _optimize(tmp: Path, name: str, kernel: Path, store: Path, n: int, *flags: str, harness=""):
    """`tlxdb optimize` arguments of a run on the sleep bundle with one case of n elements."""
    bundle = sleep_bundle(
        tmp / f"bundle-{name}",
        sleep_s=0,
        cases=[{"case_id": f"n{n}", "parameters": {"n": n}}],
        harness_append=harness,
    )
    out = tmp / f"out-{name}"
    return [
        "optimize", "--kernel", str(kernel), "--bundle", str(bundle), "--output-dir", str(out),
        "--store", str(store), *QUICK, *flags,
    ], out  # fmt: skip


def test_a_resumed_run_does_not_propose_seeds_again(tmp_path):
    """Run 1 (n=1024) promotes BLOCK_SIZE 256 and 1024. Run 2 (n=2048, history_seeds=1): c001 is
    the seed (1024); Ctrl-C while c002 is evaluated; --resume finishes c002 and asks tune for
    more. tune, a new process, must not seed again (before the fix it proposed nearest history
    #2, BLOCK_SIZE 256, as "seed 1 of 1" a second time): the run's one seed is the one it
    measured, and no configuration is proposed twice."""
    store, kernel = tmp_path / "store.duckdb", kernel_copy(tmp_path / "src")
    args, _ = _optimize(tmp_path, "r1", kernel, store, 1024, "--max-rounds", "2")
    run1 = CliRunner().invoke(main, args)
    assert run1.exit_code == 0, run1.output[-3000:]
    state = tmp_path / "interrupt.json"
    state.write_text(json.dumps({"armed": True, "seen": []}))
    args, out = _optimize(
        tmp_path, "r2", kernel, store, 2048, "--max-rounds", "3", "--history-seeds", "1",
        harness=INTERRUPTING_BUILD.format(state=str(state)),
    )  # fmt: skip
    run2 = subprocess.run(
        [TLXDB, *args],
        capture_output=True,
        text=True,
        timeout=600,
        start_new_session=True,
        preexec_fn=_ctrl_c_as_in_a_terminal,
    )
    assert run2.returncode == 130, run2.stderr[-3000:]
    assert json.loads(state.read_text()) == {"armed": False, "seen": [1024, 2048]}
    run_id = fold(read_envelopes(out / "events.jsonl")).run_id
    near = lookups.nearest_configs(Store(store), run_id) or []
    assert [n.knobs["BLOCK_SIZE"] for n in near] == [1024, 256]  # a second seed to take
    before = run_candidates(store, run_id)
    assert [c["candidate_id"] for c in before] == ["c001", "c002"]
    assert before[0]["evidence"].startswith("nearest history #1 (seed 1 of 1)")

    resumed = CliRunner().invoke(main, ["optimize", "--resume", str(out), "--store", str(store)])
    assert resumed.exit_code in (0, 2), resumed.output[-3000:]
    after = run_candidates(store, run_id)
    seeds = [c["candidate_id"] for c in after if c["evidence"].startswith("nearest history")]
    assert seeds == ["c001"], [(c["candidate_id"], c["evidence"]) for c in after]
    tuned = [c for c in after if c["candidate_id"] not in ("c001", "c002")]
    assert tuned, after  # tune proposed after the resume
    blocks = [c["knobs"]["BLOCK_SIZE"] for c in after if c["outcome"] != "failed"]
    assert len(blocks) == len(set(blocks)), after
