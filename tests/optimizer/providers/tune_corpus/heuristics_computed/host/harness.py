"""Host bundle of the corpus style heuristics_computed: operation 'softmax' (corpus_harness.py)."""

from corpus_harness import make  # a link to ../../corpus_harness.py (the frozen copy has the file)

build, verify, benchmark = make("softmax")
