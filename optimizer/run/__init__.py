"""One run from start to finish: starting and resuming, the loop, its link to the store, the output folder."""
