"""Commands that run or re-read optimizations: optimize, validate, show, report, replay."""

from __future__ import annotations
