"""Runners host the core operators: in-process (embedded) or on Faust over Kafka (distributed)."""
