"""Deciding from evidence: sample statistics, source identity, and the promotion policy (pure functions)."""
