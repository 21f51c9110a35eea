"""Content hashes: one function, one canonical form, tagged with the algorithm ("sha256:<hex>")."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

ALGORITHM = "sha256"


def digest_bytes(data: bytes) -> str:
    """The tagged sha256 of raw bytes."""
    return f"{ALGORITHM}:{hashlib.sha256(data).hexdigest()}"


def digest_text(text: str) -> str:
    """The tagged sha256 of text encoded as UTF-8."""
    return digest_bytes(text.encode("utf-8"))


def digest_file(path: str | Path) -> str:
    """The tagged sha256 of a file's bytes, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return f"{ALGORITHM}:{h.hexdigest()}"


def canonical_json(value: Any) -> str:
    """The canonical JSON form hashed everywhere: sorted keys, no whitespace, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def digest_json(value: Any) -> str:
    """The tagged sha256 of a JSON-able value in canonical form."""
    return digest_text(canonical_json(value))


def tagged_prefix(prefix: str) -> str:
    """A digest prefix as a user types it, tagged: "3f2a9c" -> "sha256:3f2a9c"; one that names
    its algorithm ("sha256:3f2a9c") stays as it is."""
    return prefix if ":" in prefix else f"{ALGORITHM}:{prefix}"
