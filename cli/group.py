"""The `tlxdb` click group and the one place domain errors become command-line errors.

Every command parses, calls one library function and renders; a TlxdbError it lets through
becomes a one-line `click.ClickException` here (message on stderr, exit 1), so no command
repeats the mapping.
"""

from __future__ import annotations

from typing import Any

import click

from tlxstore.errors import TlxdbError
from tlxstore.redaction import Redactor


class TlxdbGroup(click.Group):
    """A click group whose commands' TlxdbErrors leave as one-line errors (exit 1)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except TlxdbError as e:
            raise click.ClickException(Redactor.from_environment().text(e.message)) from None


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
