"""Parsing Python source, safe from several threads at once.

CPython 3.11 before 3.11.8 (gh-106905) can raise `SystemError: AST constructor recursion depth
mismatch` when two threads build ASTs at the same time; a parallel run evaluates candidates in
worker threads (the static guard and the launch attribution parse each candidate) while the
loop's thread may parse too. Every parse of tlxdb goes through `parse`, one at a time.
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str) -> ast.Module:
    """`ast.parse(source)`, serialized across threads; raises SyntaxError as it does."""
    with _LOCK:
        return ast.parse(source)
