"""The `tlxdb` console script: the group (cli/group.py) with every command module's commands."""

from __future__ import annotations

import os

# litellm downloads a model price map when first imported (an 8 s stall without a network). The
# process entry point, not the library, chooses the bundled copy; a user's own setting wins.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from cli import optimize_cmds, store_cmds  # noqa: E402
from cli.group import main  # noqa: E402

for _command in (*store_cmds.COMMANDS, *optimize_cmds.COMMANDS):
    main.add_command(_command)
