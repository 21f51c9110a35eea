"""Host bundle of the corpus style kernel_variable: operation 'rmsnorm' (corpus_harness.py)."""

from corpus_harness import make  # a link to ../../corpus_harness.py (the frozen copy has the file)

build, verify, benchmark = make("rmsnorm")
