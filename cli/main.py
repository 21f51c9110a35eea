"""The `tlxdb` console script: a click group. Each command module registers its commands here."""

from __future__ import annotations

import os

import click

# litellm downloads a model price map when first imported (an 8 s stall without a network). The
# process entry point, not the library, chooses the bundled copy; a user's own setting wins.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="tlxdb")
def main() -> None:
    """tlxdb: optimize Triton and TLX kernels with a measured loop, and remember everything.

    \b
    Examples:
      tlxdb optimize --kernel k.py --bundle examples/softmax/host
      tlxdb runs
      tlxdb query "SELECT * FROM decisions LIMIT 5"
    """


def _register() -> None:
    # Imported here, not at module top, so each module can import `main` to attach commands.
    from cli import optimize_cmds, store_cmds  # noqa: F401


_register()
