"""Run one bundle's harness on given sources, in this process, and print the results as JSON.

    TRITON_INTERPRET=1 python drive.py BUNDLE_DIR REPETITIONS SOURCE_FILE...

The tests start it as a child with the target's environment, as tlxdb does with a harness.
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from hopper_sweep import load_harness, measure_config  # noqa: E402

bundle = Path(sys.argv[1])
repetitions = int(sys.argv[2])
harness = load_harness(bundle / "harness.py")
target = json.loads((bundle / "target.json").read_text())
cases = json.loads((bundle / "cases.json").read_text())
results = [
    measure_config(harness, Path(f).read_text(), target, cases, repetitions) for f in sys.argv[3:]
]
print(json.dumps(results))
