"""Tune kernels written in the styles of tests/optimizer/providers/tune_corpus/ from untuned starts.

    python benchmarks/style_tune.py --out DIR [--styles gemm_fp16,gemm_bf16,row_settings,autotune_list]

Each style is a kernel (its launch settings written as that style writes them: a corpus kernel,
or an example's own) run on the hopper bundle of the example with the same operation
(examples/<op>/hopper: harness and target) with this script's cases and budget, written to
DIR/bundles/<style>/:

| style | kernel | how the knobs are written | start |
|---|---|---|---|
| gemm_fp16, gemm_bf16 | corpus tuple_gemm | `BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M = 64, 64, 32, 8` | 64x64x32, 4 warps, 2 stages |
| row_settings | corpus calculate_settings | `BLOCK_SIZE, num_warps = calculate_settings(n_cols)` (run time) | 4 warps for a 16384-wide row |
| autotune_list | corpus autotune_list | `@triton.autotune(configs=[... num_warps=2 / 4])` | the autotuner's choice |
| elementwise_noisy | examples/scale_shift | `@triton.autotune(configs=[BLOCK 16 / 32, num_warps=1])`, a 64M and a noisy 4M+3-element case, the bundle's own thresholds (10 repetitions, max CV 0.1) | the autotuner's choice |

For every style: one `tlxdb optimize --provider tune` (hopper_tune.run_optimize), then the
reference (torch.matmul; a device copy of the tensor), the start and the winner timed in
alternation in this process (hopper_tune.alternated_times): the goal is judged on that fraction
(0.90 of torch.matmul within 36 candidates; 0.90 of the measured copy within 12; for
elementwise_noisy 0.80 of the copy on its 64M case within 12). Writes DIR/style_summary.json and
a Markdown table on stdout.

`--target host` runs the same on the CPU interpreter (TRITON_INTERPRET=1) with the example's host
bundle and its own small cases instead of the style's (how the script is tested without a GPU;
no alternated timing, no goal met). The autotune_list style cannot run there: its corpus harness
leaves the autotuner, which needs a GPU driver, as it is.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))

from hopper_sweep import environment, references, target_problem  # noqa: E402
from hopper_tune import alternated_times, goal_reached, run_optimize, summarize  # noqa: E402

from optimizer.providers.knobs import apply_knobs  # noqa: E402

CORPUS = REPO / "tests" / "optimizer" / "providers" / "tune_corpus"
GEMM_START = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8}
GEMM_BUDGET = {"max_rounds": 36, "benchmark_repetitions": 5}
ROW_BUDGET = {"max_rounds": 12, "benchmark_repetitions": 5}
NOISY_BUDGET = {"max_rounds": 12}  # the bundle's own thresholds: 10 repetitions, max CV 0.1

# style -> (kernel: a corpus name or a path under the repository, example whose hopper harness
# runs it, start knobs, cases, budget)
STYLES: dict[str, tuple[str, str, dict[str, int], list[dict], dict[str, int]]] = {
    "gemm_fp16": (
        "tuple_gemm",
        "matmul",
        GEMM_START,
        [
            {
                "case_id": "4096^3",
                "parameters": {"M": 4096, "N": 4096, "K": 4096, "dtype": "float16"},
            }
        ],
        GEMM_BUDGET,
    ),
    "gemm_bf16": (
        "tuple_gemm",
        "matmul",
        GEMM_START,
        [
            {
                "case_id": "4096^3",
                "parameters": {"M": 4096, "N": 4096, "K": 4096, "dtype": "bfloat16"},
            }
        ],
        GEMM_BUDGET,
    ),
    "row_settings": (
        "calculate_settings",
        "rmsnorm",
        {},
        [
            {
                "case_id": "16384x16384",
                "parameters": {"n_rows": 16384, "n_cols": 16384, "dtype": "bfloat16"},
            }
        ],
        ROW_BUDGET,
    ),
    "autotune_list": (
        "autotune_list",
        "softmax",
        {},
        [
            {
                "case_id": "16384x16384",
                "parameters": {"n_rows": 16384, "n_cols": 16384, "dtype": "bfloat16"},
            }
        ],
        ROW_BUDGET,
    ),
    "elementwise_noisy": (
        "examples/scale_shift/kernel.py",
        "scale_shift",
        {},
        [
            {"case_id": "64M", "parameters": {"n": 64 * 2**20, "dtype": "float32"}},
            {"case_id": "4M+3", "parameters": {"n": 4 * 2**20 + 3, "dtype": "float32"}},
        ],
        NOISY_BUDGET,
    ),
}


def kernel_source(name: str) -> str:
    """A style's kernel: a path under the repository, else a corpus kernel's name."""
    path = REPO / name if "/" in name else CORPUS / name / "kernel.py"
    return path.read_text()


def bundle_for(
    style: str, out: Path, overrides: dict[str, Any] | None = None, target: str = "hopper"
) -> tuple[Path, Path, list[dict]]:
    """(kernel file, bundle folder, cases) of one style under OUT/bundles/<style>/; `overrides`
    (max_rounds, max_total_seconds) replace the style's budget in the bundle's budget.json, which
    tlxdb's flags cannot override. On the host target the bundle keeps its own cases."""
    name, example, start, cases, budget = STYLES[style]
    budget = {**budget, **(overrides or {})}
    folder = out / "bundles" / style
    bundle = folder / target
    shutil.copytree(REPO / "examples" / example / target, bundle, dirs_exist_ok=True)
    if target == "hopper":
        cases = [{**c, "weight": 1.0} for c in cases]
        (bundle / "cases.json").write_text(json.dumps(cases, indent=1) + "\n")
    else:
        cases = json.loads((bundle / "cases.json").read_text())
    base = json.loads((bundle / "budget.json").read_text())
    (bundle / "budget.json").write_text(json.dumps({**base, **budget}, indent=1) + "\n")
    kernel = folder / "kernel.py"
    source = kernel_source(name)
    kernel.write_text(apply_knobs(source, start) if start else source)
    return kernel, bundle, cases


def tune_style(
    style: str,
    out: Path,
    store: Path,
    rounds: int,
    overrides: dict[str, Any] | None = None,
    target: str = "hopper",
) -> dict[str, Any]:
    example = STYLES[style][1]
    on_gpu = target == "hopper"
    kernel, bundle, cases = bundle_for(style, out, overrides, target)
    run = run_optimize(style, kernel, bundle, out, store, [])
    alternated = None
    best = (run["result"] or {}).get("winner_id")
    if best and on_gpu:
        final = out / style / "experiments" / best / "kernel.py"
        sources = {"start": kernel.read_text(), "final": final.read_text()}
        alternated = alternated_times(example, bundle, cases, sources, rounds)
    summary = summarize(example, cases, run, references(example, cases, on_gpu), alternated)
    if alternated:  # every goal on the fraction timed in alternation with its reference
        name = "torch" if example == "matmul" else "copy"
        metric = f"fraction_of_{name}_alternated"
        summary["goal"]["metric"] = metric
        reached = goal_reached(summary["goal"], summary["cases"], metric)
        summary["goal"]["met"] = (
            all(v is not None and v >= summary["goal"]["goal"] for v in reached)
            and summary["candidates_to_best"] is not None
            and summary["candidates_to_best"] <= summary["goal"]["candidates"]
        )
    return {
        "style": style,
        "kernel": STYLES[style][0],
        "start_knobs": STYLES[style][2],
        **summary,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path, help="folder for results and the store")
    ap.add_argument("--styles", default=",".join(STYLES))
    ap.add_argument("--rounds", type=int, default=5, help="alternations after each run")
    ap.add_argument(
        "--max-total-seconds",
        type=float,
        help="each style's tlxdb time budget (its search then ends; the winner's revalidation and "
        "the alternated timing still follow)",
    )
    ap.add_argument("--target", default="hopper", choices=["hopper", "host"])
    ap.add_argument(
        "--max-rounds",
        type=int,
        help="each style's candidate budget instead of its own (GEMM 36, rows 12); the goal's "
        "candidate bound stays the style's",
    )
    args = ap.parse_args(argv)
    problem = target_problem("style_tune", args.target)
    if problem:
        print(problem, file=sys.stderr)
        return 1
    styles = [s.strip() for s in args.styles.split(",") if s.strip()]
    unknown = [s for s in styles if s not in STYLES]
    if unknown:
        print(
            f"style_tune: unknown style {unknown[0]}; known: {', '.join(STYLES)}", file=sys.stderr
        )
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    store = args.out / "store.duckdb"
    overrides = {
        k: v
        for k, v in (("max_rounds", args.max_rounds), ("max_total_seconds", args.max_total_seconds))
        if v is not None
    }
    summaries = []
    for style in styles:
        summary = tune_style(style, args.out, store, args.rounds, overrides, args.target)
        summaries.append(summary)
        report = {"environment": environment(), "target": args.target, "styles": summaries}
        (args.out / "style_summary.json").write_text(json.dumps(report, indent=1))
        print(
            f"{style}: {summary['candidates']} candidates, best {summary['best_knobs']} after "
            f"{summary['candidates_to_best']}, stop {summary['stopping_reason']}, goal "
            f"{summary['goal']}",
            file=sys.stderr,
            flush=True,
        )
    lines = [
        "| style | case | start us | final us | start / final of reference (alternated) "
        "| candidates to best | goal met |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for s in summaries:
        metric = s["goal"]["metric"]
        for r in s["cases"]:
            a, b = r.get(f"start_{metric}"), r.get(f"final_{metric}")
            frac = "" if a is None or b is None else f"{a:.3f} / {b:.3f}"
            lines.append(
                f"| {s['style']} | {r['case_id']} | {r['start_us'] or ''} | {r['final_us'] or ''} "
                f"| {frac} | {s['candidates_to_best']} | {s['goal']['met']} |"
            )
    table = "\n".join(lines)
    (args.out / "style_summary.md").write_text(table + "\n")
    print(table)
    return 0 if all(s["run_id"] is not None for s in summaries) else 1


if __name__ == "__main__":
    sys.exit(main())
