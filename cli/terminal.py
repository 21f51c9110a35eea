"""Text from the evidence (imported hypotheses, a harness's diagnostics, a query's rows) shown on a
terminal: its control characters (ESC and the rest of C0 and C1, DEL; not tab or newline) are
shown escaped (`\\x1b`), so an imported text cannot move the cursor, retitle the window or hide
what follows. Text written to a file or a pipe is left as it is."""

from __future__ import annotations

import re
from typing import IO

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def escaped(text: str) -> str:
    """`text` with its control characters written out as `\\xNN`."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def for_stream(text: str, stream: IO[str]) -> str:
    """`text` as it should be written to `stream`: escaped when the stream is a terminal."""
    isatty = getattr(stream, "isatty", None)
    return escaped(text) if isatty is not None and isatty() else text
