"""A benchmark of real training faults: `python -m benchmarks.faults` (see __main__.py)."""
