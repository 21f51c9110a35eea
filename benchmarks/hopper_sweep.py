"""Hand sweep of the hopper examples' knobs: the ceiling tune is judged against.

    python benchmarks/hopper_sweep.py --out DIR [--examples softmax,rmsnorm,matmul] [--quick]

For every configuration of a fixed grid (the knobs tune searches), the source is rewritten with
optimizer.providers.knobs, then the bundle's own harness builds, verifies and benchmarks it on every case,
in this process. The untuned start is measured too, and the references (a device copy; torch's
softmax / rms_norm / matmul). One JSON file per example goes to DIR, with every sample.
Throughput is reported as a fraction of the measured copy bandwidth (memory-bound kernels) or of
torch.matmul (the matmul), and of docs/MEASUREMENTS.md's H200 copy figure, 4.24 TB/s.

`--target host` runs the same on the CPU interpreter with tiny grids: that is how the script is
tested without a GPU. Needs torch, triton and tlxdb's optimizer.providers.knobs (pydantic).
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import itertools
import json
import os
import platform
import statistics
import sys
import time
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from optimizer.providers.knobs import apply_knobs, knob_values  # noqa: E402

FACTS_COPY_BYTES_PER_S = 4.24e12  # docs/MEASUREMENTS.md: H200 device-to-device copy, read + write

# The grids: docs/MEASUREMENTS.md's hand sweeps (BLOCK x num_warps; the 108-point matmul grid).
GRIDS: dict[str, dict[str, dict[str, list[int]]]] = {
    "hopper": {
        "softmax": {"BLOCK": [256, 512, 1024, 2048, 4096, 8192], "num_warps": [1, 2, 4, 8, 16, 32]},
        "rmsnorm": {"BLOCK": [256, 512, 1024, 2048, 4096, 8192], "NUM_WARPS": [1, 2, 4, 8, 16, 32]},
        "matmul": {
            "BLOCK_M": [64, 128, 256],
            "BLOCK_N": [64, 128, 256],
            "BLOCK_K": [32, 64],
            "num_warps": [4, 8],
            "num_stages": [2, 3, 4],
        },
    },
    "host": {
        "softmax": {"BLOCK": [16, 32, 64, 128, 256, 512, 1024, 2048, 4096]},
        "rmsnorm": {"BLOCK": [256, 1024, 4096]},
        "matmul": {"BLOCK_M": [32, 64], "BLOCK_N": [32, 64], "BLOCK_K": [32, 64]},
    },
}
QUICK = {
    "softmax": {"BLOCK": [1024, 8192], "num_warps": [4, 16]},
    "rmsnorm": {"BLOCK": [1024, 4096], "NUM_WARPS": [4, 16]},
    "matmul": {
        "BLOCK_M": [128],
        "BLOCK_N": [128, 256],
        "BLOCK_K": [64],
        "num_warps": [8],
        "num_stages": [3, 4],
    },
}


def load_harness(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"sweep_harness_{path.parent.parent.name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def grid_configs(grid: dict[str, list[int]]) -> list[dict[str, int]]:
    names = sorted(grid)
    return [
        dict(zip(names, combo, strict=True))
        for combo in itertools.product(*(grid[n] for n in names))
    ]


def case_work(example: str, params: dict[str, Any]) -> tuple[int, int | None]:
    """(minimum bytes moved, flops or None) of one case, as the harnesses declare them."""
    elem = 4 if params.get("dtype", "bfloat16") == "float32" else 2
    if example == "matmul":
        m, n, k = params["M"], params["N"], params["K"]
        return (m * k + k * n + m * n) * elem, 2 * m * n * k
    if example == "scale_shift":
        return 2 * params["n"] * elem, None
    rows, cols = params["n_rows"], params["n_cols"]
    extra = cols if example == "rmsnorm" else 0
    return (2 * rows * cols + extra) * elem, None


def measure_config(
    harness: ModuleType, source: str, target: dict, cases: list[dict], repetitions: int
) -> dict[str, Any]:
    """Build, verify and benchmark one source on every case; never raises."""
    out: dict[str, Any] = {"built": False, "verified": False, "cases": {}, "error": None}
    try:
        built = harness.build(source, target)
        if isinstance(built, dict) and not built.get("success", True):
            out["error"] = f"build: {built.get('diagnostics', '')}"[:2000]
            return out
        artifact = built.get("artifact") if isinstance(built, dict) else built
        out["built"] = True
        for case in cases:
            ok = harness.verify(artifact, case)
            passed = ok.get("passed") if isinstance(ok, dict) else bool(ok)
            if not passed:
                out["error"] = (
                    f"verify {case['case_id']}: {ok.get('diagnostics', '') if isinstance(ok, dict) else ''}"
                )
                return out
            result = harness.benchmark(artifact, case, repetitions)
            samples = result["samples_us"] if isinstance(result, dict) else list(result)
            out["cases"][case["case_id"]] = {
                "samples_us": samples,
                "median_us": statistics.median(samples),
            }
        out["verified"] = True
    except Exception as e:  # a config that crashes is a data point, not the end of the sweep
        out["error"] = f"{type(e).__name__}: {e}"[:2000]
        out["traceback"] = traceback.format_exc()[-4000:]
    return out


def median_us(fn: Any, *args: Any) -> float:
    import triton

    return triton.testing.do_bench(functools.partial(fn, *args), return_mode="median") * 1e3


def ceiling_call(
    example: str, params: dict[str, Any], device: str = "cuda"
) -> tuple[Any, tuple[Any, ...]]:
    """The ceiling a case is judged against, as (function, arguments) on fresh random inputs:
    torch.matmul for the matmul, a device-to-device copy of the tensor otherwise (the same bytes
    as the kernel's input)."""
    import torch

    dtype = getattr(torch, params.get("dtype", "bfloat16"))
    if example == "matmul":
        a = torch.randn(params["M"], params["K"], device=device, dtype=dtype)
        b = torch.randn(params["K"], params["N"], device=device, dtype=dtype)
        return torch.matmul, (a, b)
    shape = (params["n"],) if example == "scale_shift" else (params["n_rows"], params["n_cols"])
    x = torch.randn(*shape, device=device, dtype=dtype)
    return torch.Tensor.copy_, (torch.empty_like(x), x)


def references(example: str, cases: list[dict], on_gpu: bool) -> dict[str, Any]:
    """Median microseconds of the ceiling (ceiling_call) and of torch's own op (softmax,
    RMSNorm, matmul), per case (GPU only)."""
    if not on_gpu:
        return {}
    import torch
    import torch.nn.functional as F

    out: dict[str, Any] = {}
    for case in cases:
        p = case["parameters"]
        fn, args = ceiling_call(example, p)
        if example == "matmul":
            out[case["case_id"]] = {"torch_us": median_us(fn, *args)}
            continue
        x = args[1]
        row = {"copy_us": median_us(fn, *args)}
        if example == "softmax":
            row["torch_us"] = median_us(torch.softmax, x, -1)
        elif example == "rmsnorm":
            w = torch.ones(p["n_cols"], device="cuda", dtype=x.dtype)
            row["torch_us"] = median_us(F.rms_norm, x, (p["n_cols"],), w, 1e-6)
        out[case["case_id"]] = row
    return out


def annotate(example: str, cases: list[dict], entry: dict[str, Any], refs: dict[str, Any]) -> None:
    """Add throughput and fractions of the ceilings to a measured entry, in place."""
    for case in cases:
        c = entry["cases"].get(case["case_id"])
        if c is None:
            continue
        bytes_moved, flops = case_work(example, case["parameters"])
        seconds = c["median_us"] * 1e-6
        c["bytes_per_s"] = bytes_moved / seconds
        c["fraction_of_facts_copy"] = c["bytes_per_s"] / FACTS_COPY_BYTES_PER_S
        ref = refs.get(case["case_id"], {})
        if flops is not None:
            c["flops_per_s"] = flops / seconds
            if "torch_us" in ref:
                c["fraction_of_torch"] = ref["torch_us"] / c["median_us"]
        elif "copy_us" in ref:
            c["fraction_of_measured_copy"] = ref["copy_us"] / c["median_us"]


def geomean(values: list[float]) -> float:
    return float(statistics.geometric_mean(values)) if values else float("nan")


def sweep_example(
    example: str, target_name: str, grid: dict[str, list[int]], repetitions: int, on_gpu: bool
) -> dict[str, Any]:
    bundle = REPO / "examples" / example / target_name
    source = (REPO / "examples" / example / "kernel.py").read_text()
    harness = load_harness(bundle / "harness.py")
    target = json.loads((bundle / "target.json").read_text())
    cases = json.loads((bundle / "cases.json").read_text())
    start_config = knob_values(source)
    refs = references(example, cases, on_gpu)
    started = time.perf_counter()
    untuned = {"knobs": start_config, **measure_config(harness, source, target, cases, repetitions)}
    annotate(example, cases, untuned, refs)
    entries = []
    for config in grid_configs(grid):
        entry = {
            "knobs": {**start_config, **config},
            **measure_config(harness, apply_knobs(source, config), target, cases, repetitions),
        }
        annotate(example, cases, entry, refs)
        entries.append(entry)
    ok = [e for e in entries if e["verified"]]
    base = untuned["cases"]
    for e in ok:
        if untuned["verified"]:
            e["speedup_vs_untuned"] = geomean(
                [base[c]["median_us"] / e["cases"][c]["median_us"] for c in e["cases"]]
            )
    best = max(ok, key=lambda e: e.get("speedup_vs_untuned", 0.0), default=None)
    return {
        "example": example,
        "target": target_name,
        "grid": grid,
        "configurations": len(entries),
        "failed": len(entries) - len(ok),
        "seconds": time.perf_counter() - started,
        "references_us": refs,
        "untuned": untuned,
        "best": best,
        "entries": entries,
    }


def environment() -> dict[str, Any]:
    import torch
    import triton

    env: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "host": platform.node(),
        "TRITON_INTERPRET": os.environ.get("TRITON_INTERPRET"),
    }
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        env.update(
            gpu=props.name,
            num_sms=props.multi_processor_count,
            capability=f"{props.major}.{props.minor}",
            cuda=torch.version.cuda,
        )
    return env


def target_problem(script: str, target: str) -> str | None:
    """Why this machine cannot run `target` (hopper: a CUDA device; host: the interpreter)."""
    if target == "hopper":
        import torch

        if not torch.cuda.is_available():
            return f"{script}: no CUDA device; use --target host on a CPU"
    elif os.environ.get("TRITON_INTERPRET") != "1":
        return f"{script}: --target host needs TRITON_INTERPRET=1 in the environment"
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path, help="folder for the JSON results")
    ap.add_argument("--examples", default="softmax,rmsnorm,matmul")
    ap.add_argument("--target", default="hopper", choices=["hopper", "host"])
    ap.add_argument("--repetitions", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="a few configurations per example")
    args = ap.parse_args(argv)
    on_gpu = args.target == "hopper"
    problem = target_problem("hopper_sweep", args.target)
    if problem:
        print(problem, file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {"environment": environment(), "examples": {}}
    for example in [e.strip() for e in args.examples.split(",") if e.strip()]:
        grid = (QUICK if args.quick and on_gpu else GRIDS[args.target])[example]
        result = sweep_example(example, args.target, grid, args.repetitions, on_gpu)
        result["environment"] = summary["environment"]
        (args.out / f"sweep_{example}_{args.target}.json").write_text(json.dumps(result, indent=1))
        best = result["best"]
        summary["examples"][example] = {
            "configurations": result["configurations"],
            "failed": result["failed"],
            "seconds": round(result["seconds"], 1),
            "untuned": {k: v for k, v in result["untuned"].items() if k != "traceback"},
            "best_knobs": best["knobs"] if best else None,
            "best_cases": best["cases"] if best else None,
            "best_speedup_vs_untuned": best.get("speedup_vs_untuned") if best else None,
        }
        print(
            f"{example}: {result['configurations']} configurations, {result['failed']} failed, "
            f"best {best['knobs'] if best else None} "
            f"({best.get('speedup_vs_untuned', float('nan')) if best else float('nan'):.3g}x the untuned start)",
            file=sys.stderr,
        )
    (args.out / f"sweep_summary_{args.target}.json").write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
