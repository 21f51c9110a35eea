"""HTML reports rendered in a real headless Chromium (Debian's `chromium`; .ci/run installs it),
and what a screenshot shows: its size, the share of drawn pixels, the colours, the share of
coloured (not grey) pixels: a browser's own error page is drawn too, but in greys."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
WIDTH, HEIGHT = 1200, 2000


def screenshot(page: Path, png: Path, width: int = WIDTH, height: int = HEIGHT) -> None:
    """A PNG of `page` as Chromium draws it; skips where Chromium is not installed (fails on CI)."""
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed; .ci/run installs it (apt-get install chromium)")
        pytest.skip("chromium is not installed here (apt-get install chromium)")
    done = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         f"--window-size={width},{height}", f"--screenshot={png}", page.as_uri()],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0 and png.exists(), done.stderr[-2000:]


def drawn(png: Path) -> tuple[tuple[int, int], float, int]:
    """(width, height), the fraction of pixels that are not white, and the distinct colours."""
    import numpy as np
    from matplotlib import image

    px = image.imread(png)[..., :3]
    flat = (px * 255).astype(np.uint8).reshape(-1, 3)
    return (
        (px.shape[1], px.shape[0]),
        float((flat < 250).any(axis=1).mean()),
        len(np.unique(flat, axis=0)),
    )


def coloured(png: Path) -> float:
    """The fraction of pixels of a clear colour (channels differing by more than 80 of 255)."""
    from matplotlib import image

    px = image.imread(png)[..., :3]
    return float(((px.max(axis=-1) - px.min(axis=-1)) > 80 / 255).mean())
