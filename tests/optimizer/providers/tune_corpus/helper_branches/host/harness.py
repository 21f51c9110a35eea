"""Host bundle of the corpus style helper_branches: operation 'add' (corpus_harness.py)."""

from corpus_harness import make  # a link to ../../corpus_harness.py (the frozen copy has the file)

build, verify, benchmark = make("add")
