"""What makes two sources "the same kernel", and what makes two measurements comparable.

Invariants:
- `normalized_source` is a function of the program, not of its spelling: comments, docstrings,
  blank lines, quoting and formatting do not change it. A source that does not parse normalizes
  to its non-blank lines with surrounding whitespace stripped (the TLX agent's rule), so even a
  broken candidate has a stable identity.
- A measurement is comparable to another only under the same `measurement_key`: the same kind
  of device, the same Triton and torch versions, and the same bundle contents.
"""

from __future__ import annotations

import ast

from optimizer import pysource
from tlxstore.hashing import digest_json, digest_text


def _is_docstring(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


class _DropDocstrings(ast.NodeTransformer):
    def _strip(self, node: ast.AST) -> ast.AST:
        self.generic_visit(node)
        body = getattr(node, "body", None)
        if body and _is_docstring(body[0]):
            node.body = body[1:] or [ast.Pass()]  # type: ignore[attr-defined]
        return node

    visit_Module = _strip
    visit_ClassDef = _strip
    visit_FunctionDef = _strip
    visit_AsyncFunctionDef = _strip


def normalized_source(text: str) -> str:
    """The source with comments, docstrings and formatting dropped (its AST, unparsed)."""
    try:
        tree = pysource.parse(text)
    except (SyntaxError, ValueError):
        return "\n".join(line.strip() for line in text.splitlines() if line.strip())
    return ast.unparse(_DropDocstrings().visit(tree))


def raw_source_hash(text: str) -> str:
    """The tagged sha256 of a source text as written (source_hashes' first; no parse)."""
    return digest_text(text)


def source_hashes(text: str) -> tuple[str, str]:
    """(raw, normalized) tagged sha256 of a source text."""
    return raw_source_hash(text), digest_text(normalized_source(text))


def measurement_key(
    device_kind: str, triton: str | None, torch: str | None, bundle_digest: str
) -> str:
    """The identity under which measurements are comparable (and sources count as measured)."""
    return digest_json(
        {"device_kind": device_kind, "triton": triton, "torch": torch, "bundle": bundle_digest}
    )
