"""Integrity guards: checks no harness should have to remember.

- `static`: AST checks of a candidate's source, one reason per finding.
- `snapshot`: identity snapshots of the harness and the comparison/timing functions, taken in the
  harness child before the candidate is imported and compared after every harness call.
- `files`: sha256 of the protected paths (the private bundle copy) before and after an
  evaluation.
- `tripwire`: implausible measurements (more than 10x over the parent, above the hardware
  ceiling) that trigger extra verification.

docs/GUARDS.md lists every guard and what it catches.
"""
