"""Secrets kept out of everything tlxdb records or prints.

A secret is the value of an environment variable whose name looks secret (it holds KEY, TOKEN,
SECRET, PASSWORD, PASSWD or CREDENTIAL, in any case) and that is at least MIN_SECRET_CHARS long,
or the user:password part of a URL (`http://user:pw@host/` keeps its scheme and host). Redacting
replaces each with MASK. The run log redacts every batch before writing it (so the store, the
views, reports and result.json never see a secret); the output folder's other files, the live
log and the command line's messages are redacted as they are written. The harness child gets
tlxdb's environment without its secret-looking variables (`without_secrets`); the bundle's own
target environment still reaches it, and its secret-looking values are redacted too.

This module reads the process environment (every variable's name, by the pattern above) where
it is asked for a Redactor, never at import.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping

MASK = "[redacted]"
MIN_SECRET_CHARS = 8  # shorter values ("1", "true", a port) are not secrets and would mask noise

_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
_URL_CREDENTIALS = re.compile(r"(?<=://)[^\s/@'\"<>\\]+@")
_URL_CREDENTIALS_BYTES = re.compile(rb"(?<=://)[^\s/@'\"<>\\]+@")


def is_secret_name(name: str) -> bool:
    """Whether an environment variable's name looks like it holds a secret."""
    return _SECRET_NAME.search(name) is not None


def without_secrets(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` without its secret-looking variables (what a harness child is given)."""
    return {k: v for k, v in environ.items() if not is_secret_name(k)}


class Redactor:
    """Replaces known secret values and URL credentials with MASK."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        values = {s for s in secrets if len(s) >= MIN_SECRET_CHARS}
        self.secrets = tuple(sorted(values, key=len, reverse=True))  # longest first
        # each as it appears in text, and inside a JSON string (escaped, ASCII-only or not)
        forms = {
            f
            for s in self.secrets
            for f in (s, json.dumps(s)[1:-1], json.dumps(s, ensure_ascii=False)[1:-1])
        }
        self._text_forms = tuple(sorted(forms, key=len, reverse=True))
        self._byte_forms = tuple(f.encode() for f in self._text_forms)

    @classmethod
    def from_environment(cls, *extra: Mapping[str, str]) -> Redactor:
        """The secrets of this process's environment and of `extra` environments."""
        return cls(v for env in (os.environ, *extra) for k, v in env.items() if is_secret_name(k))

    def text(self, text: str) -> str:
        """`text` with every secret masked."""
        for form in self._text_forms:
            if form in text:
                text = text.replace(form, MASK)
        if "://" in text:
            text = _URL_CREDENTIALS.sub(MASK + "@", text)
        return text

    def data(self, data: bytes) -> bytes:
        """UTF-8 `data` (a JSON line) with every secret masked."""
        for form in self._byte_forms:
            if form in data:
                data = data.replace(form, MASK.encode())
        if b"://" in data:
            data = _URL_CREDENTIALS_BYTES.sub(MASK.encode() + b"@", data)
        return data
