"""The FGD measure, typical pods, the capacity index and pending-pod explanations that the
detectors (``streams.detectors``) are built on."""
