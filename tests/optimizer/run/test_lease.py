"""One writer per run: `tlxdb optimize --resume RUN` while the run's own process is alive is
refused in one line naming that process, and writes nothing; once the holder is dead (SIGKILL)
the lease is free at once."""

import os
import signal
import socket

import pytest
from click.testing import CliRunner
from support.drive_run import start_held

from cli.main import main
from optimizer.run.lease import run_lease
from tlxstore.runlog import RunLog

pytestmark = pytest.mark.slow


def test_a_second_writer_is_refused_naming_the_holder_and_writes_nothing(tmp_path):
    proc = start_held(tmp_path, "BuildFinished:c001")
    out, store = tmp_path / "out", tmp_path / "store.duckdb"
    try:
        log = out / "events.jsonl"
        before = log.read_bytes()
        run_id = RunLog.open(log).run_id
        for ref in (str(out), run_id):
            r = CliRunner().invoke(main, ["optimize", "--resume", ref, "--store", str(store)])
            assert r.exit_code == 1, r.output
            assert r.stderr == (
                f"Error: run {run_id} is being written by pid {proc.pid} on host "
                f"{socket.gethostname()}; wait for it to end, or stop it and then --resume\n"
            )
        assert log.read_bytes() == before
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=120)
    with run_lease(out, run_id):  # a dead holder's lease is free at once
        pass
