"""Launch attribution: which kernels a candidate's harness call ran, how often, for how long.

tlxdb profiles every correct candidate itself, with no harness code: the harness child runs one
extra `benchmark(artifact, case, 1)` under Proton (hook="triton"); the evaluator turns the reply
into a ProfileCollected event whose metrics have source "proton". The main kernel is the heaviest
kernel among those the candidate's own source defines (its `@triton.jit` functions), else the
heaviest of all (a harness's L2 flush or reference kernel is never the main kernel when the
candidate's own kernel ran). Where Proton cannot run (the CPU interpreter, no GPU) the event says
"unavailable on this target" and holds null, never 0.
"""

from __future__ import annotations

import ast
from typing import Any

from optimizer import pysource
from tlxstore.events import ProfileCollected, ProfileMetric

SOURCE = "proton"
MAIN_TIME = "main_kernel_time_us"  # per launch of the main kernel
PROFILING_WALL = "profiling_wall_ms"  # the time this profile took, never part of any sample


def kernel_functions(source: str) -> list[str]:
    """The names of the functions `source` decorates with something Triton-like (jit, autotune,
    heuristics), in source order; [] when it does not parse."""
    try:
        tree = pysource.parse(source)
    except (SyntaxError, ValueError):
        return []
    names = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef):
            continue
        for dec in node.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            dotted = ast.unparse(target)
            if dotted.rsplit(".", 1)[-1] in ("jit", "autotune", "heuristics"):
                names.append(node.name)
                break
    return names


def main_kernel(kernels: list[dict[str, Any]], own: list[str]) -> dict[str, Any] | None:
    """The heaviest kernel the candidate defines, else the heaviest kernel; None when none ran."""
    timed = [k for k in kernels if isinstance(k.get("time_us"), int | float)]
    mine = [k for k in timed if k.get("name") in own]
    pool = mine or timed
    return max(pool, key=lambda k: k["time_us"]) if pool else None


def unavailable_event(candidate_id: str, case_id: str, reason: str) -> ProfileCollected:
    return ProfileCollected(
        candidate_id=candidate_id,
        case_id=case_id,
        metrics=[ProfileMetric(name=MAIN_TIME, value=None, unit="us", source=SOURCE)],
        diagnostics=reason,
    )


def attribution_event(
    candidate_id: str, case_id: str, reply: dict[str, Any], own: list[str]
) -> ProfileCollected:
    """The ProfileCollected of one `attribute` reply that saw kernels."""
    result = reply["result"]
    kernels = [k for k in result.get("kernels", []) if isinstance(k, dict) and k.get("name")]
    main = main_kernel(kernels, own)
    per_launch = None
    if main is not None and main.get("count"):
        per_launch = float(main["time_us"]) / float(main["count"])
    metrics = [
        ProfileMetric(name=MAIN_TIME, value=per_launch, unit="us", source=SOURCE),
        ProfileMetric(
            name="kernel_time_us", value=result.get("kernel_time_us"), unit="us", source=SOURCE
        ),
        ProfileMetric(
            name="kernel_launches", value=result.get("kernel_launches"), unit="count", source=SOURCE
        ),
        ProfileMetric(name=PROFILING_WALL, value=reply.get("wall_ms"), unit="ms", source=SOURCE),
    ]
    for k in kernels:
        metrics.append(
            ProfileMetric(
                name=f"kernel_time_us:{k['name']}", value=k.get("time_us"), unit="us", source=SOURCE
            )
        )
        count = k.get("count")
        metrics.append(
            ProfileMetric(
                name=f"kernel_launches:{k['name']}",
                value=None if count is None else float(count),
                unit="count",
                source=SOURCE,
            )
        )
    names = [k["name"] for k in kernels]
    if main is not None:
        names = [main["name"], *[n for n in names if n != main["name"]]]
    hatchet = (result.get("artifacts") or {}).get("hatchet")
    return ProfileCollected(
        candidate_id=candidate_id,
        case_id=case_id,
        metrics=metrics,
        kernel_names=names,
        diagnostics="\n".join(str(d) for d in result.get("diagnostics", [])),
        artifacts=[hatchet] if hatchet else [],
    )


def is_attribution(event: ProfileCollected) -> bool:
    """Whether the event is tlxdb's own launch attribution (not a harness profile)."""
    return any(m.source == SOURCE and m.name == MAIN_TIME for m in event.metrics)


def main_kernel_of(event: ProfileCollected) -> str | None:
    """The main kernel an attribution event names (its first kernel), or None."""
    if not is_attribution(event):
        return None
    return event.kernel_names[0] if event.kernel_names else None


def was_unavailable(event: ProfileCollected) -> bool:
    """Whether the event says Proton could not run on this target (not that it ran and found
    no kernel)."""
    return is_attribution(event) and not event.kernel_names and len(event.metrics) == 1
