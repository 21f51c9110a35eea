"""Secrets kept out of everything tlxdb records or prints.

A secret is the value of an environment variable whose name looks secret (it holds KEY, TOKEN,
SECRET, PASSWORD, PASSWD or CREDENTIAL, in any case) and that is at least MIN_SECRET_CHARS long,
or the user:password part of a URL (`http://user:pw@host/` keeps its scheme and host). Redacting
replaces each with MASK. The run log redacts every batch before writing it (so the store, the
views, reports and result.json never see a secret); the output folder's other files, the live
log and the command line's messages are redacted as they are written. The harness child gets
tlxdb's environment without its secret-looking variables (`without_secrets`); the bundle's own
target environment still reaches it, and its secret-looking values are redacted too.

A command line's secret-looking arguments are secrets too: the value after (or `=` of) an option
whose name looks secret, a secret-looking variable assignment, a token shaped as a well-known key
(`sk-...`, `ghp_...`, `AKIA...`), also inside a command given as one argument (`--provider-command
"agent.sh --api-key sk-..."`). Each secret is masked in every form it is written in: as it is,
escaped by repr() or JSON (once or twice), and base64-encoded.

This module reads the process environment (every variable's name, by the pattern above) and
the process's command line where it is asked for a Redactor, never at import.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import sys
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


def _written_forms(secret: str) -> set[str]:
    """The ways a secret appears in text: as it is, as repr() writes it (a backslash doubled),
    inside a JSON string (escaped, ASCII-only or not), those again inside a JSON string (a
    traceback's repr in an event), and base64-encoded (standard and URL-safe, at each of the
    three alignments it can have inside a longer encoded text: the characters that depend on
    the secret alone)."""
    once = {
        secret,
        repr(secret)[1:-1],
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
    }
    forms = once | {json.dumps(f)[1:-1] for f in once}
    raw = secret.encode()
    for offset in range(3):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            encoded = encode(b"\0" * offset + raw).decode()
            start = 4 if offset else 0  # the first group mixes in what came before
            end = len(encoded) - (4 if (offset + len(raw)) % 3 else 0)  # and the last, after
            if end - start >= MIN_SECRET_CHARS:
                forms.add(encoded[start:end])
    return forms


# A command line's arguments that hold a secret: the value of a secret-looking option
# (`--api-key VALUE`, `--api-key=VALUE`, `-token VALUE`), of a secret-looking variable assignment
# (`OPENAI_API_KEY=VALUE`), and tokens shaped as well-known keys.
_OPTION = re.compile(r"^--?([A-Za-z0-9_.-]+)(?:=(.*))?$", re.DOTALL)
_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.+)$", re.DOTALL)
_KEY_SHAPED = re.compile(
    r"^(?:sk-[A-Za-z0-9_-]{12,}|gh[pousr]_[A-Za-z0-9]{20,}|xox[abposr]-[A-Za-z0-9-]{10,}"
    r"|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{30,})$"
)


def command_line_secrets(args: Iterable[str]) -> list[str]:
    """The secret-looking values in a command line (tlxdb's own argv, and the commands given
    inside it, e.g. `--provider-command "agent.sh --api-key sk-..."`, split as a shell would)."""
    found: list[str] = []
    for arg in args:
        found += _secrets_in(_split(arg) if any(c.isspace() for c in arg) else [arg])
    found += _secrets_in(list(args))
    return found


def _split(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:  # an unbalanced quote: words as they are
        return command.split()


def _secrets_in(tokens: list[str]) -> list[str]:
    found = []
    for i, token in enumerate(tokens):
        option, assignment = _OPTION.match(token), _ASSIGNMENT.match(token)
        if option and is_secret_name(option.group(1)):
            value = option.group(2)
            if value is None and i + 1 < len(tokens):
                value = tokens[i + 1]
            if value:
                found.append(value)
        elif assignment and is_secret_name(assignment.group(1)):
            found.append(assignment.group(2))
        elif _KEY_SHAPED.match(token):
            found.append(token)
    return found


class Redactor:
    """Replaces known secret values (in every form they are written, _written_forms) and URL
    credentials with MASK."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        values = {s for s in secrets if len(s) >= MIN_SECRET_CHARS}
        self.secrets = tuple(sorted(values, key=len, reverse=True))  # longest first
        forms = {f for s in self.secrets for f in _written_forms(s)}
        self._text_forms = tuple(sorted(forms, key=len, reverse=True))
        self._byte_forms = tuple(f.encode() for f in self._text_forms)

    @classmethod
    def from_environment(cls, *extra: Mapping[str, str]) -> Redactor:
        """The secrets of this process's environment and of `extra` environments, and the
        secret-looking arguments of this process's command line (command_line_secrets)."""
        return cls(
            [v for env in (os.environ, *extra) for k, v in env.items() if is_secret_name(k)]
            + command_line_secrets(sys.argv[1:])
        )

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
