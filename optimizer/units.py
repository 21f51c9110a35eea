"""Numbers in the words tlxdb writes (live log, reasons, notes, reports)."""

from __future__ import annotations


def us(value: float) -> str:
    """A time in microseconds as text, without its unit: four significant digits, as `:.4g`
    writes them, but never in exponent form (13950, not 1.395e+04, beside 8230 in one line)."""
    return f"{value:.0f}" if abs(value) >= 1e4 else f"{value:.4g}"
