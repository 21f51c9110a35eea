"""Does a kernel run slower or faster by when its module was built in the process? Outside tlxdb.

    python benchmarks/instance_order.py --kernel K --bundle B [--instances 4] [--rounds 12]
        [--processes 3] [--cases cases.json] [--knobs JSON] [--verify-first] [--out F.json]

Each process (a fresh `python` child, as tlxdb's harness child is) builds `--instances` copies of
one kernel source through the bundle's own harness `build()`, each copy the source plus a module
constant nothing reads (as aa_check.py's candidates are; `--knobs` applied to the source first,
optimizer.providers.knobs), in order 1, 2, ...; `--verify-first`
verifies copy 1 on every case first, as tlxdb verifies a candidate before it builds its
references. Then it times the copies in alternation, `--rounds` rounds of one harness
`benchmark(artifact, case, 2)` call each, the copies' order turned by one place each round, after
two seconds of warm-up calls. Per process and case: each copy's median over its samples, and its
ratio to copy 1's (above 1: the copy is slower than the first built). One line per process and a
JSON summary (`--out`); the timings are the harness's (on the CPU: the Triton interpreter).

Written for issue 27's GEMM A/A, where the candidate's instance (built first in the child) ran
about 1.5% slower than the reference's in every window.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from optimizer.providers.knobs import apply_knobs  # noqa: E402


def _harness(bundle: Path) -> Any:
    spec = importlib.util.spec_from_file_location("instance_order_harness", bundle / "harness.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def child(args: argparse.Namespace) -> dict[str, Any]:
    """One process's measurement (run as `--child`)."""
    harness = _harness(args.bundle)
    cases = json.loads((args.cases or args.bundle / "cases.json").read_text())
    source = args.kernel.read_text()
    if args.knobs:
        source = apply_knobs(source, json.loads(args.knobs))
    artifacts = []
    for i in range(1, args.instances + 1):
        built = harness.build(f"{source}\n\n_ORDER_NOOP = {i}\n", "")
        if not built.get("success"):
            raise SystemExit(f"copy {i} did not build: {built.get('diagnostics')}")
        artifacts.append(built["artifact"])
        if i == 1 and args.verify_first:
            for case in cases:
                for _ in range(3):
                    verdict = harness.verify(built["artifact"], case)
                    if not verdict.get("passed", False):
                        raise SystemExit(f"copy 1 failed verification: {verdict}")
    out: dict[str, Any] = {}
    for case in cases:
        start = time.monotonic()
        while time.monotonic() - start < args.warm_up_s:
            harness.benchmark(artifacts[0], case, 1)
        samples: list[list[float]] = [[] for _ in artifacts]
        for r in range(args.rounds):
            k = r % len(artifacts)
            for i in list(range(k, len(artifacts))) + list(range(k)):
                result = harness.benchmark(artifacts[i], case, 2)
                got = result["samples_us"] if isinstance(result, dict) else result
                samples[i].extend(float(s) for s in got)
        medians = [statistics.median(s) for s in samples]
        out[case["case_id"]] = {
            "median_us": medians,
            "ratio_to_first": [m / medians[0] for m in medians],
        }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernel", required=True, type=Path)
    ap.add_argument("--bundle", required=True, type=Path)
    ap.add_argument("--cases", type=Path, help="a cases.json in place of the bundle's")
    ap.add_argument("--knobs", help="JSON object of knob values applied to the kernel first")
    ap.add_argument("--instances", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--processes", type=int, default=3)
    ap.add_argument("--warm-up-s", type=float, default=2.0)
    ap.add_argument("--verify-first", action="store_true")
    ap.add_argument("--out", type=Path, help="where the JSON summary goes")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.instances < 2 or args.rounds < 1 or args.processes < 1:
        ap.error("--instances must be at least 2, --rounds and --processes at least 1")
    if args.child:
        print(json.dumps(child(args)))
        return 0
    argv_child = list(sys.argv[1:] if argv is None else argv)
    runs = []
    for p in range(args.processes):
        done = subprocess.run(
            [sys.executable, __file__, *argv_child, "--child"],
            capture_output=True,
            text=True,
            cwd=REPO,
        )
        if done.returncode != 0:
            print(done.stderr[-2000:], file=sys.stderr)
            return 1
        result = json.loads(done.stdout.strip().splitlines()[-1])
        runs.append(result)
        for case, r in result.items():
            ratios = " ".join(f"{x:.4f}" for x in r["ratio_to_first"])
            print(f"process {p + 1} case {case}: copy/first median ratio {ratios}", flush=True)
    summary = {"argv": argv_child, "processes": runs}
    if args.out is not None:
        args.out.write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
