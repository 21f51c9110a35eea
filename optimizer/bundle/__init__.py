"""The target bundle: locate, load and freeze it, and validate it before any optimization."""
