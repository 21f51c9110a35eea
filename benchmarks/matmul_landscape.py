"""The measured landscape of the matmul example's knobs: every tile/warps/stages point tune can reach.

    python benchmarks/matmul_landscape.py --out DIR [--target hopper|host] [--jobs 16]

hopper_sweep.py measures docs/MEASUREMENTS.md's 108-point grid; a search, though, walks well outside it
(BLOCK_K 16 or 128, 2 or 16 warps, 1 or 5 stages, GROUP_M). This script measures the whole box
tune's constraints allow, so a search can be replayed offline against real H200 times
(tests/optimizer/providers/test_tune_landscape.py does). Four phases, each written to
DIR/landscape_matmul_<target>.json as soon as it ends (a cut-off run still leaves its data):

1. compile: every configuration in parallel processes (--jobs), through the kernel's own launcher
   on a small problem whose shapes specialize like the cases (multiples of 16); failures recorded.
2. screen: in this process, each compiled configuration verified by the bundle's harness and
   timed once on the first case (a short do_bench median, 25 ms, L2 flushed).
3. confirm: the best --top configurations measured on every case, --repetitions samples each.
4. group: GROUP_M over its domain at the best three tiles, every case.

`--target host` runs a tiny box on the CPU interpreter (how the script is tested); its timings
measure the interpreter, not a GPU.
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from hopper_sweep import (  # noqa: E402
    annotate,
    environment,
    load_harness,
    measure_config,
    references,
    target_problem,
)

from optimizer.providers.knobs import apply_knobs, knob_values  # noqa: E402

EXAMPLE = REPO / "examples" / "matmul"
SMEM_BYTES = 232448  # sm_90 shared memory per block, as the tune provider's constraint
MAX_ACC_PER_THREAD = 128  # tune's register constraint: accumulator values per thread

BOXES: dict[str, dict[str, list[int]]] = {
    "hopper": {
        "BLOCK_M": [32, 64, 128, 256],
        "BLOCK_N": [32, 64, 128, 256],
        "BLOCK_K": [16, 32, 64, 128],
        "num_warps": [2, 4, 8, 16],
        "num_stages": [1, 2, 3, 4, 5],
    },
    "host": {"BLOCK_M": [16, 32], "BLOCK_N": [16, 32], "BLOCK_K": [16, 32]},
}
GROUP_M = {"hopper": [1, 2, 4, 8, 16, 32, 64], "host": [1, 8]}
# What the compile phase runs: shapes that specialize like the cases (every dimension and stride a
# multiple of 16), small enough to be instant.
WARM_SHAPE = {"hopper": (256, 256, 256), "host": (32, 32, 32)}


def box_configs(target: str) -> list[dict[str, int]]:
    """Every point of the box that tune's constraints allow (shared memory, registers), with
    at least 8 accumulator values per thread (fewer leaves threads idle)."""
    box = BOXES[target]
    names = sorted(box)
    out = []
    for combo in itertools.product(*(box[n] for n in names)):
        c = dict(zip(names, combo, strict=True))
        if target == "hopper":
            bm, bn, bk = c["BLOCK_M"], c["BLOCK_N"], c["BLOCK_K"]
            per_thread = bm * bn / (32 * c["num_warps"])
            if c["num_stages"] * (bm * bk + bk * bn) * 2 > SMEM_BYTES:
                continue
            if not 8 <= per_thread <= MAX_ACC_PER_THREAD:
                continue
        out.append(c)
    return out


def compile_one(job: tuple[str, str, dict[str, int]]) -> dict[str, Any]:
    """Compile one configuration in a worker process, for both shapes the main process will
    launch it with (the harness's build probe and the cases'); never raises."""
    target, source, config = job
    started = time.perf_counter()
    try:
        import torch

        bundle = EXAMPLE / target
        harness = load_harness(bundle / "harness.py")
        built = harness.build(source, json.loads((bundle / "target.json").read_text()))
        if not built["success"]:
            raise RuntimeError(built["diagnostics"])
        m, n, k = WARM_SHAPE[target]
        device = "cuda" if target == "hopper" else "cpu"
        dtype = torch.bfloat16 if target == "hopper" else torch.float32
        a = torch.randn(m, k, device=device, dtype=dtype)
        b = torch.randn(k, n, device=device, dtype=dtype)
        built["artifact"](a, b)
        if device == "cuda":
            torch.cuda.synchronize()
        return {"knobs": config, "compiled": True, "compile_s": time.perf_counter() - started}
    except Exception as e:  # a configuration that cannot compile is a data point
        return {
            "knobs": config,
            "compiled": False,
            "compile_s": time.perf_counter() - started,
            "error": f"{type(e).__name__}: {e}"[:1000],
        }


def make_timer(target: str, case: dict[str, Any]) -> Any:
    """A quick timer for the screen phase: a short do_bench median (L2 flushed) on the GPU,
    the best of three wall-clock calls on the interpreter."""
    import torch

    p = case["parameters"]
    device = "cuda" if target == "hopper" else "cpu"
    dtype = getattr(torch, p.get("dtype", "bfloat16"))
    a = torch.randn(p["M"], p["K"], device=device, dtype=dtype)
    b = torch.randn(p["K"], p["N"], device=device, dtype=dtype)
    if target == "hopper":
        import triton

        def gpu(fn: Any) -> float:
            return (
                triton.testing.do_bench(lambda: fn(a, b), warmup=5, rep=25, return_mode="median")
                * 1e3
            )

        return gpu

    def cpu(fn: Any) -> float:
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            fn(a, b)
            times.append((time.perf_counter() - t0) * 1e6)
        return min(times)

    return cpu


def screen_one(
    harness: Any, source: str, target: dict, case: dict[str, Any], knobs: dict[str, int], timer: Any
) -> dict[str, Any]:
    """Build (a cache hit after the compile phase), verify with the bundle's harness, time once."""
    out: dict[str, Any] = {
        "knobs": knobs,
        "built": False,
        "verified": False,
        "cases": {},
        "error": None,
    }
    try:
        built = harness.build(source, target)
        if not built["success"]:
            out["error"] = f"build: {built['diagnostics']}"[:1000]
            return out
        out["built"] = True
        ok = harness.verify(built["artifact"], case)
        if not ok["passed"]:
            out["error"] = f"verify: {ok['diagnostics']}"[:1000]
            return out
        us = timer(built["artifact"])
        out["cases"][case["case_id"]] = {"samples_us": [us], "median_us": us}
        out["verified"] = True
    except Exception as e:  # a configuration that crashes is a data point
        out["error"] = f"{type(e).__name__}: {e}"[:1000]
    return out


def median_of(entry: dict[str, Any], case_id: str) -> float | None:
    c = entry.get("cases", {}).get(case_id)
    return None if c is None else c["median_us"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path, help="folder for the JSON result")
    ap.add_argument("--target", default="hopper", choices=["hopper", "host"])
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    ap.add_argument("--top", type=int, default=40, help="configurations confirmed on every case")
    ap.add_argument("--repetitions", type=int, default=3, help="samples per case when confirming")
    args = ap.parse_args(argv)
    on_gpu = args.target == "hopper"
    problem = target_problem("matmul_landscape", args.target)
    if problem:
        print(problem, file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    out_file = args.out / f"landscape_matmul_{args.target}.json"
    bundle = EXAMPLE / args.target
    source = (EXAMPLE / "kernel.py").read_text()
    harness = load_harness(bundle / "harness.py")
    target = json.loads((bundle / "target.json").read_text())
    cases = json.loads((bundle / "cases.json").read_text())
    first = cases[0]
    start = knob_values(source)
    result: dict[str, Any] = {
        "environment": environment(),
        "box": BOXES[args.target],
        "start_knobs": start,
        "cases": cases,
        "phases": {},
    }

    def save() -> None:
        tmp = out_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(result, indent=1))
        tmp.replace(out_file)

    def log(text: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)

    result["references_us"] = references("matmul", cases, on_gpu)
    configs = box_configs(args.target)
    log(f"compile: {len(configs)} configurations on {args.jobs} processes")
    started = time.perf_counter()
    jobs = [(args.target, apply_knobs(source, c), {**start, **c}) for c in configs]
    with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        compiled = list(pool.map(compile_one, jobs, chunksize=4))
    result["phases"]["compile"] = {
        "seconds": time.perf_counter() - started,
        "failed": [c for c in compiled if not c["compiled"]],
    }
    save()
    log(f"compile: done, {len(result['phases']['compile']['failed'])} failed")

    started = time.perf_counter()
    timer = make_timer(args.target, first)
    screened: list[dict[str, Any]] = []
    for i, c in enumerate([{"knobs": start, "compiled": True}, *compiled]):
        if c["compiled"]:
            screened.append(
                screen_one(
                    harness, apply_knobs(source, c["knobs"]), target, first, c["knobs"], timer
                )
            )
        if (i + 1) % 100 == 0:
            log(f"screen: {i + 1} measured")
    for e in screened:
        annotate("matmul", [first], e, result["references_us"])
    result["phases"]["screen"] = {"seconds": time.perf_counter() - started, "entries": screened}
    save()
    log("screen: done")

    started = time.perf_counter()
    ok = sorted(
        (e for e in screened if e["verified"]), key=lambda e: median_of(e, first["case_id"]) or 1e30
    )
    confirm = [e["knobs"] for e in ok[: args.top]]
    if start not in confirm:
        confirm.append(start)
    confirmed = []
    for config in confirm:
        entry = {
            "knobs": config,
            **measure_config(harness, apply_knobs(source, config), target, cases, args.repetitions),
        }
        annotate("matmul", cases, entry, result["references_us"])
        confirmed.append(entry)
    result["phases"]["confirm"] = {"seconds": time.perf_counter() - started, "entries": confirmed}
    save()
    log("confirm: done")

    started = time.perf_counter()
    grouped = []
    best_tiles = [e["knobs"] for e in confirmed if e["verified"]][:3]
    for config in best_tiles:
        for g in GROUP_M[args.target]:
            if g == config["GROUP_M"]:
                continue
            knobs = {**config, "GROUP_M": g}
            entry = {
                "knobs": knobs,
                **measure_config(
                    harness, apply_knobs(source, knobs), target, cases, args.repetitions
                ),
            }
            annotate("matmul", cases, entry, result["references_us"])
            grouped.append(entry)
    result["phases"]["group"] = {"seconds": time.perf_counter() - started, "entries": grouped}
    save()
    best = min(
        (e for e in confirmed if e["verified"]),
        key=lambda e: statistics.fmean(median_of(e, c["case_id"]) or 0 for c in cases),
        default=None,
    )
    log(f"done: best {best['knobs'] if best else None}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
