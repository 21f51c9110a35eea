"""Host bundle of the corpus style autotune_generated: operation 'matmul' (corpus_harness.py)."""

from corpus_harness import make  # a link to ../../corpus_harness.py (the frozen copy has the file)

build, verify, benchmark = make("matmul")
