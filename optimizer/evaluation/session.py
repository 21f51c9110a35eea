"""The child-process session: one harness child and the pipes tlxdb talks to it over.

A `Session` starts `python -m optimizer.evaluation.child` (under a wrapper such as ncu where one
is given), sends it one command at a time and reads its one-line reply, all within a deadline;
what the commands mean is the pipeline's business (optimizer.evaluation.pipeline), and which child
serves which candidate the evaluator's (optimizer.evaluation.evaluator).

Invariants:
- The child runs in its own process group, in a folder of its own, with the environment the caller
  gives it alone. tlxdb's process never imports the harness or the candidate.
- Commands travel to the child over one pipe and replies come back as JSON lines over another
  (two FIFOs in the child's folder under a wrapper); the child's stdout/stderr (which the harness
  may print to) go to a log whose tail becomes diagnostics.
- A wait past the deadline kills the whole process group (ChildGone TIMEOUT); a child that dies
  or writes a malformed reply is ChildGone CRASH. Closing ends the group and removes the folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from optimizer.evaluation.requests import HarnessBundle
from tlxstore.events import FailureKind

POLL_S = 1.0  # how often a wait on the child checks that it is still alive
DIAGNOSTICS_TAIL_CHARS = 4000  # the tail of a traceback or child log kept as evidence


class ChildGone(Exception):
    """The child is gone: it died, wrote a malformed reply, or ran past its deadline (`kind`)."""

    def __init__(self, kind: FailureKind, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


def tail(text: str, limit: int = DIAGNOSTICS_TAIL_CHARS) -> str:
    """The last `limit` characters of `text` (diagnostics keep the end of a traceback)."""
    return text if len(text) <= limit else "..." + text[-limit:]


def last_line(text: str) -> str:
    """The last line of `text` that is not blank (an error's one-line reason)."""
    lines = [ln for ln in str(text).strip().splitlines() if ln.strip()]
    return lines[-1].strip() if lines else ""


class Session:
    """One child process: send a command, wait for its one-line reply, within a deadline."""

    def __init__(
        self,
        bundle: HarnessBundle,
        python: str,
        deadline: float,
        env: dict[str, str],
        wrapper: list[str] | None = None,
    ):
        """`wrapper`: a command the child runs under (ncu); the pipes are then two FIFOs in
        the child's folder, since a wrapper may not hand descriptors through."""
        self.deadline = deadline
        self.workdir = Path(tempfile.mkdtemp(prefix="tlxdb-child-"))
        self.log_path = self.workdir / "child.log"
        child = [python, "-m", "optimizer.evaluation.child"]
        if wrapper:
            req_path, rep_path = self.workdir / "requests.fifo", self.workdir / "replies.fifo"
            os.mkfifo(req_path)
            os.mkfifo(rep_path)
            # Both ends read-write: opening never blocks, whenever the child opens its ends.
            self.req_w = os.open(req_path, os.O_RDWR)
            self.rep_r = os.open(rep_path, os.O_RDWR | os.O_NONBLOCK)
            argv = [*wrapper, *child, str(req_path), str(rep_path)]
            keep: tuple[int, ...] = ()
        else:
            req_r, self.req_w = os.pipe()
            self.rep_r, rep_w = os.pipe()
            argv, keep = [*child, str(req_r), str(rep_w)], (req_r, rep_w)
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                argv,
                pass_fds=keep,
                start_new_session=True,
                env=env,
                cwd=self.workdir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        for fd in keep:
            os.close(fd)
        self.buffer = b""
        self.closed = False
        self.final_log = ""
        self.load_sent = False  # a prestarted child: its load reply is still to be read

    def log_tail(self) -> str:
        try:
            return tail(self.log_path.read_text(errors="replace"))
        except OSError:
            return ""

    def call(self, msg: dict[str, Any]) -> dict[str, Any]:
        self.send(msg)
        return self.receive()

    def send(self, msg: dict[str, Any]) -> None:
        data = (json.dumps(msg) + "\n").encode()
        try:
            view = memoryview(data)
            while view:
                self._wait(write=True)
                n = os.write(self.req_w, view)
                view = view[n:]
        except OSError:
            raise self._gone() from None

    def receive(self) -> dict[str, Any]:
        while b"\n" not in self.buffer:
            self._wait(write=False)
            chunk = os.read(self.rep_r, 1 << 16)
            if not chunk:
                raise self._gone()
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        try:
            reply = json.loads(line)
        except json.JSONDecodeError:
            raise ChildGone(
                FailureKind.CRASH, "the harness child wrote a malformed reply"
            ) from None
        if not isinstance(reply, dict):
            raise ChildGone(FailureKind.CRASH, "the harness child wrote a malformed reply")
        return reply

    def _wait(self, *, write: bool) -> None:
        fd = self.req_w if write else self.rep_r
        while True:
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                raise ChildGone(FailureKind.TIMEOUT, "the evaluation ran past its time limit")
            step = min(remaining, POLL_S)
            ready = (
                select.select([], [fd], [], step) if write else select.select([fd], [], [], step)
            )
            if ready[1] if write else ready[0]:
                return
            if self.proc.poll() is not None:  # a FIFO never reads as closed: ask the process
                raise self._gone()

    def _gone(self) -> ChildGone:
        try:
            rc = self.proc.wait(timeout=max(0.1, min(5.0, self.deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            self.kill()
            rc = self.proc.returncode
        log = self.log_tail()
        if rc is not None and rc < 0:
            name = (
                signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else str(-rc)
            )
            return ChildGone(
                FailureKind.CRASH, tail(f"the harness child died of signal {name}\n{log}")
            )
        return ChildGone(
            FailureKind.CRASH, tail(f"the harness child exited with status {rc}\n{log}")
        )

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                os.write(self.req_w, b'{"op": "exit"}\n')
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=max(0.5, min(10.0, self.deadline - time.monotonic())))
        # Whatever the child left behind in its group (threads are gone with it; processes not).
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        if self.proc.poll() is None:
            self.proc.wait()
        self.final_log = self.log_tail()  # what the child (or its wrapper) printed, kept
        for fd in (self.req_w, self.rep_r):
            with contextlib.suppress(OSError):
                os.close(fd)
        for p in sorted(self.workdir.rglob("*"), reverse=True):
            with contextlib.suppress(OSError):
                p.unlink() if not p.is_dir() or p.is_symlink() else p.rmdir()
        with contextlib.suppress(OSError):
            self.workdir.rmdir()
