"""Runs one optimization through the library API in its own process (for the SIGKILL and SIGINT
tests).

usage: python drive_run.py TMP_DIR [HOLD] [--parallel]

HOLD, e.g. `BuildFinished:c002`, makes the run stand still right after that event is in its log:
the driver writes TMP_DIR/held and sleeps until a signal ends it. A test kills or interrupts it at
exactly that point, however busy the machine is (no race against the run's own speed).

--parallel: one round of the 8 candidates of ROUND8 on the sleep bundle with `--devices all`
(simulated devices: TLXDB_SIMULATED_DEVICES in the environment).
"""

from __future__ import annotations

import faulthandler
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

# the repository before tests/: tests/optimizer/ must not shadow the optimizer package
_TESTS = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(_TESTS.parent), str(_TESTS)]

from optimizer.run import lifecycle  # noqa: E402
from support.bundles import VECADD_CASES, sleep_bundle  # noqa: E402
from support.runner import request  # noqa: E402
from support.scripted_provider import ScriptedProvider, set_block  # noqa: E402

SCRIPT = [set_block(128), set_block(256), set_block(512)]
FLAGS = {"max_rounds": 3, "candidates_per_round": 1}
ROUND8 = [set_block(n) for n in (128, 256, 512, 1024, 32, 2048, 16, 4096)]
# max_candidate_seconds: a candidate promoted beside an incumbent is measured in two windows (3
# members, then 9 instances) at SLEEP_HARNESS_S a call plus one warm-up call per member and case,
# about 70 s of sleeps: runner.FAST's 60 s timed c003 out after a resume (2026-12-05)
FLAGS8 = {"max_rounds": 1, "candidates_per_round": 8, "max_candidate_seconds": 180}
HELD = "held"
HOLD_MAX_S = 600  # a held driver that nobody signals ends itself


def hold_after(spec: str, tmp: Path):
    """An observer that stands still after the event `Type:candidate_id` was appended."""
    kind, candidate_id = spec.split(":")

    def observer(env, state) -> None:
        e = env.event
        if type(e).__name__ == kind and getattr(e, "candidate_id", None) == candidate_id:
            (tmp / HELD).write_text(str(os.getpid()))
            time.sleep(HOLD_MAX_S)

    return observer


def start_held(
    tmp: Path,
    spec: str,
    timeout_s: float = 300,
    *,
    parallel: bool = False,
    env: dict[str, str] | None = None,
) -> subprocess.Popen:
    """Start the driver in its own process and return once it stands still after `spec`."""
    env = {**os.environ, "TMPDIR": str(tmp), **(env or {})}
    args = [sys.executable, __file__, str(tmp), spec] + (["--parallel"] if parallel else [])
    proc = subprocess.Popen(args, env=env)
    deadline = time.monotonic() + timeout_s
    while not (tmp / HELD).exists():
        if proc.poll() is not None:
            raise AssertionError(f"the run ended before {spec} (exit {proc.returncode})")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"the run never reached {spec} in {timeout_s} s")
        time.sleep(0.05)
    return proc


def wait_or_dump(proc: subprocess.Popen, timeout_s: float) -> None:
    """Wait for the driver to end; one that does not in `timeout_s` prints every thread's stack
    (into the test's captured stderr) before it is killed and the wait fails."""
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGUSR1)
        time.sleep(2)
        proc.kill()
        raise


def parallel_request(tmp: Path, devices: str | None = "all") -> lifecycle.RunRequest:
    """One round of ROUND8 on the sleep bundle (devices None: the same run, one at a time)."""
    return request(tmp, bundle=sleep_bundle(tmp / "bundle"), flags=FLAGS8, devices=devices)


if __name__ == "__main__":
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # a test that waits in vain: stacks
    # Ctrl-C as in a terminal: a SIGINT that the process running the tests ignores (something
    # in the test session set SIG_IGN; a child inherits that, and Python then installs no
    # KeyboardInterrupt handler) or blocks would leave the driver asleep in its hold
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # nor one it blocks
    args = [a for a in sys.argv[1:] if a != "--parallel"]
    tmp = Path(args[0])
    observer = hold_after(args[1], tmp) if len(args) > 1 else None
    if "--parallel" in sys.argv:
        req, script = parallel_request(tmp), ROUND8
    else:
        # samples fixed by BLOCK_SIZE: the decisions, and so the events the tests stop at, are
        # the same however busy the machine is
        bundle = sleep_bundle(tmp / "bundle", sleep_s=0, cases=VECADD_CASES)
        req, script = request(tmp, bundle=bundle, flags=FLAGS), SCRIPT
    result = lifecycle.optimize(req, provider=ScriptedProvider(list(script)), observer=observer)
    sys.exit(result.exit_code)
