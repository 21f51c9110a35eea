"""Host bundle of the corpus style heuristics_literal: operation 'add' (corpus_harness.py)."""

from corpus_harness import make  # a link to ../../corpus_harness.py (the frozen copy has the file)

build, verify, benchmark = make("add")
