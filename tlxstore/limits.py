"""The limits tlxdb holds untrusted input to (a TLX folder, a harness's replies, a bundle's JSON,
a user's query), in one place; docs/GUARDS.md lists them with the reason for each number.

Each is enforced where the input enters, with a one-line refusal (or, for a harness's samples, a
warning and the surplus left out), so nothing beyond them reaches a run log or the store.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from tlxstore.errors import OutsideFolderError, TooDeepError

# The store keeps rounds, counts and attempts in 32-bit columns and declared sizes (bytes moved,
# flops) in 64-bit ones: a larger value would not fit its view.
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

# Samples accepted from one benchmark call of one case (a harness child's reply, a TLX folder's
# timing.samples_us). A harness asked for `repetitions` samples that returns more has the first
# max(repetitions, MAX_SAMPLES_PER_CASE) kept and the rest left out (the live log says so); a TLX
# folder with more is refused. The bootstrap interval draws 2,000 resamples of every case and
# side: 1,000 samples take 16 MB a draw, the 2,000,000 a harness once returned took 29.8 GiB.
MAX_SAMPLES_PER_CASE = 1_000

# How deeply a JSON document tlxdb reads from a user's files may nest (cases.json, target.json,
# budget.json, experiments.json, result.json). Real ones nest a few levels; Python's parser
# would otherwise stop with a RecursionError near 1,000.
MAX_JSON_DEPTH = 64

# How long a query a user typed (`tlxdb query`) may run before it is interrupted, by default
# (`--timeout`): well under the store lock's 60 s (TLXDB_LOCK_TIMEOUT_S), so a query never holds
# the store long enough to make a writer give up.
QUERY_TIMEOUT_S = 30.0

# The most rows `tlxdb query` prints: a result is refused as soon as it passes them. Printing 30
# million rows took 3.5 minutes and 12 GB of memory (a smaller machine would have killed it);
# a million is what a terminal or a pipe can still use. Larger results belong in a file
# (`tlxdb export --view`, or a DuckDB client on the store).
QUERY_MAX_ROWS = 1_000_000


def loads_bounded(text: str | bytes, name: str) -> Any:
    """json.loads, refusing a document nested deeper than MAX_JSON_DEPTH in one line (TooDeepError
    naming `name`): deeper ones would exhaust the stack of the code that reads them later."""
    try:
        value = json.loads(text)
    except RecursionError:
        value = None
        depth = MAX_JSON_DEPTH + 1
    else:
        depth = _depth(value)
    if depth > MAX_JSON_DEPTH:
        raise TooDeepError(
            f"{name} nests deeper than {MAX_JSON_DEPTH} levels; tlxdb does not read it"
        )
    return value


def _depth(value: Any) -> int:
    """How deeply parsed JSON nests (0 for a scalar), without recursion; stops past the limit."""
    depth, level = 0, [value]
    while depth <= MAX_JSON_DEPTH:
        level = [v for v in level if isinstance(v, dict | list)]
        if not level:
            return depth
        depth += 1
        level = [c for v in level for c in (v.values() if isinstance(v, dict) else v)]
    return depth


def regular_file_inside(root: Path, relative: str | Path) -> Path | None:
    """`root / relative` if it is a regular file reached without a symlink at any step below
    `root`; None if it does not exist. A symlink, or anything but a regular file (a folder, a
    FIFO), raises OutsideFolderError naming it: an imported folder is read only from itself."""
    path = root
    for part in Path(relative).parts:
        path = path / part
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            return None
        if stat.S_ISLNK(mode):
            raise OutsideFolderError(
                f"{path} is a symlink; tlxdb reads an imported folder's own files only"
            )
    if not stat.S_ISREG(mode):
        raise OutsideFolderError(f"{path} is not a regular file")
    return path
