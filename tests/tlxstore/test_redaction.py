"""Every written form of a secret is masked (tlxstore/redaction.py): the CLI test
(tests/cli/test_secrets.py) leaks a backslashed secret through repr() and base64; these cover the
forms it does not reach, each on its own."""

from __future__ import annotations

import base64
import json

import pytest

from tlxstore.redaction import MASK, Redactor

# a DEL and an ESC: repr() writes them \x7f and \x1b, JSON \u007f and \u001b
SECRET = "tok\x7fen-\x1b-0123456789"


@pytest.mark.parametrize(
    "written",
    [
        SECRET,
        repr(SECRET),
        json.dumps(SECRET),
        json.dumps(SECRET, ensure_ascii=False),
        json.dumps(json.dumps(SECRET)),
        json.dumps(repr(SECRET)),
    ],
    ids=["as is", "repr", "json", "json unicode", "json twice", "repr in json"],
)
def test_each_escaped_form_of_a_secret_is_masked(written):
    masked = Redactor([SECRET]).text(f"before {written} after")
    assert MASK in masked
    assert "0123456789" not in masked


@pytest.mark.parametrize("prefix", ["", "u", "us"], ids=["offset 0", "offset 1", "offset 2"])
@pytest.mark.parametrize("encode", [base64.b64encode, base64.urlsafe_b64encode])
def test_base64_of_a_secret_inside_longer_text_is_masked(prefix, encode):
    """The secret after 0, 1 or 2 bytes of other text: each alignment encodes it differently."""
    secret = "s3cr3t?>?>token-value"  # bytes whose base64 differs from its URL-safe form
    encoded = encode(f"{prefix}:{secret}:tail".encode()).decode()
    assert MASK in Redactor([secret]).text(encoded)
    assert MASK not in Redactor(["another-token-value"]).text(encoded)
