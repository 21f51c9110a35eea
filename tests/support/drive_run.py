"""Runs one optimization through the library API in its own process (for the SIGKILL test).

usage: python drive_run.py TMP_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from optimizer.run import lifecycle
from support.runner import request  # noqa: E402
from support.scripted_provider import ScriptedProvider, set_block  # noqa: E402

SCRIPT = [set_block(128), set_block(256), set_block(512)]
FLAGS = {"max_rounds": 3, "candidates_per_round": 1}

if __name__ == "__main__":
    tmp = Path(sys.argv[1])
    result = lifecycle.optimize(request(tmp, flags=FLAGS), provider=ScriptedProvider(list(SCRIPT)))
    sys.exit(result.exit_code)
