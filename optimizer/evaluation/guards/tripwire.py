"""Tripwires: measurements too good to be true. A tripwire does not reject; it triggers extra
verification with new seeds and a re-benchmark, and is recorded as a non-blocking
IntegrityFlagged event, so a candidate is never promoted on its first measurement alone."""

from __future__ import annotations

from dataclasses import dataclass

from optimizer.units import number

MAX_PLAUSIBLE_SPEEDUP = 10.0  # over the parent, per case


@dataclass(frozen=True)
class Tripped:
    guard: str
    detail: str


def check(
    medians_us: dict[str, float],
    parent_medians_us: dict[str, float],
    declared: dict[str, tuple[int | None, int | None]],
    peak_bandwidth_bytes_per_s: float | None,
    peak_flops_per_s: float | None,
) -> list[Tripped]:
    """Cases more than MAX_PLAUSIBLE_SPEEDUP x faster than the parent, or whose declared bytes or
    FLOPs imply a throughput above the hardware ceiling."""
    out: list[Tripped] = []
    for case_id, median_us in medians_us.items():
        parent = parent_medians_us.get(case_id)
        if parent and median_us > 0 and parent / median_us > MAX_PLAUSIBLE_SPEEDUP:
            out.append(
                Tripped(
                    "tripwire:speedup>10x",
                    f"case {case_id}: {parent / median_us:.1f}x faster than the parent "
                    f"({number(parent)} us -> {number(median_us)} us)",
                )
            )
        bytes_moved, flops = declared.get(case_id, (None, None))
        seconds = median_us * 1e-6
        if bytes_moved and peak_bandwidth_bytes_per_s and seconds > 0:
            bw = bytes_moved / seconds
            if bw > peak_bandwidth_bytes_per_s:
                out.append(
                    Tripped(
                        "tripwire:bandwidth>ceiling",
                        f"case {case_id}: {bw / 1e9:.3g} GB/s exceeds the hardware ceiling "
                        f"{peak_bandwidth_bytes_per_s / 1e9:.3g} GB/s",
                    )
                )
        if flops and peak_flops_per_s and seconds > 0:
            rate = flops / seconds
            if rate > peak_flops_per_s:
                out.append(
                    Tripped(
                        "tripwire:flops>ceiling",
                        f"case {case_id}: {rate / 1e12:.3g} TFLOP/s exceeds the hardware ceiling "
                        f"{peak_flops_per_s / 1e12:.3g} TFLOP/s",
                    )
                )
    return out
