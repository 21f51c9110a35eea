"""Prompts for the model-driven providers: template files, built-in guidance documents, the
renderer that turns a ProviderContext into prompt text, and the typed model reply with its
strict parser. No prompt text lives in Python code."""
