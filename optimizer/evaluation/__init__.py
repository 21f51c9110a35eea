"""Running one candidate: the harness child process, the evaluator that drives it, and the integrity guards."""
