"""Helpers shared by tests: bundles, a scripted provider, a run request builder, a driver script."""
