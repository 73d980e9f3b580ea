"""The profile join: node and task profiles kept current from pod, node, event and GPU streams."""
