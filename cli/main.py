"""The `tlxdb` console script: the group (cli/group.py) with every command module's commands.

The command modules import only click at module level (the optimizer, the store, matplotlib and
torch inside the commands), so `tlxdb --help` and `tlxdb runs` start fast
(benchmarks/cli_startup.py).
"""

from __future__ import annotations

import os

# litellm downloads a model price map when first imported (an 8 s stall without a network). The
# process entry point, not the library, chooses the bundled copy; a user's own setting wins.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# pydantic looks for plugins in every installed distribution's entry points when the first model
# is built (15-20 ms of every command's start on a venv with the llm extra); tlxdb uses none.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "1")

from cli import bundle_cmds, optimize_cmds, store_cmds  # noqa: E402
from cli.group import main  # noqa: E402

for _command in (*store_cmds.COMMANDS, *optimize_cmds.COMMANDS, *bundle_cmds.COMMANDS):
    main.add_command(_command)
