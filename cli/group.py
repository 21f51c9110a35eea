"""The `tlxdb` click group and the one place domain errors become command-line errors.

Every command parses, calls one library function and renders; a TlxdbError it lets through
becomes a one-line `click.ClickException` here (message on stderr, exit 1), so no command
repeats the mapping. A usage error (an unknown option, a value of the wrong type) exits 1 too,
not click's 2: 2 means a run ended without a winner (docs/CONTRACT.md, exit codes), and a
script that tests for it must not read a typo as a finished run.
"""

from __future__ import annotations

from typing import Any

import click

from tlxstore.errors import TlxdbError
from tlxstore.redaction import Redactor


class TlxdbGroup(click.Group):
    """A click group whose commands' TlxdbErrors leave as one-line errors (exit 1)."""

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        try:
            return super().make_context(*args, **kwargs)
        except click.UsageError as e:
            raise _bad_input(e) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as e:
            raise _bad_input(e) from None
        except TlxdbError as e:
            raise click.ClickException(Redactor.from_environment().text(e.message)) from None


class BadUsage(click.UsageError):
    """A usage error that exits 1 (bad input) instead of click's 2 (a run without a winner here)."""

    exit_code = 1


def _bad_input(e: click.UsageError) -> click.UsageError:
    """`e` as a BadUsage: its whole message (a suggestion too: "Did you mean ...") and context."""
    return e if isinstance(e, BadUsage) else BadUsage(e.format_message(), e.ctx)


@click.group(cls=TlxdbGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="tlxdb")
def main() -> None:
    """tlxdb: optimize Triton and TLX kernels with a measured loop, and remember everything.

    \b
    Examples:
      tlxdb optimize --kernel k.py --bundle examples/softmax/host
      tlxdb runs
      tlxdb query "SELECT * FROM decisions LIMIT 5"
    """
