"""The benchmark scripts' figures as small PNG files: benchmarks/results/ is kept under 2.6 MB
(tests/test_results_figures.py), and a line plot needs few colours. `save_png` renders at 72 dpi
and stores a palette of at most 64 colours (Pillow, which matplotlib needs anyway): the noise
simulation's figure went from 72 KB to 18 KB, the A/A figure from 27 KB to 8 KB."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

COLOURS = 64


def save_png(fig: Any, path: Path) -> None:
    """Write the matplotlib figure `fig` to `path` as a palette PNG."""
    from PIL import Image

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=72)
    buffer.seek(0)
    quantize(Image.open(buffer), path)


def quantize(image: Any, path: Path) -> None:
    """Write the Pillow image to `path` with at most COLOURS colours, optimized."""
    from PIL import Image

    image.convert("RGB").quantize(colors=COLOURS, method=Image.Quantize.MEDIANCUT).save(
        path, format="PNG", optimize=True
    )
