"""Commands over the evidence store: runs, query, export, import."""

from __future__ import annotations
