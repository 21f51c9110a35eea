"""Numbers in the words tlxdb writes (live log, reasons, notes, reports)."""

from __future__ import annotations


def number(value: float) -> str:
    """A number as text: four significant digits, as `:.4g` writes them, but never in exponent
    form for a large one (a time of 13950 us, not 1.395e+04 beside 8230 in one line)."""
    return f"{value:.0f}" if abs(value) >= 1e4 else f"{value:.4g}"
