"""Fragmentation analysis: the FGD measure, typical pods, and the detectors built on them."""
