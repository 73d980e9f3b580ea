"""Where a run's outputs go: the output registry and the store output of the embedded runner,
and the feeds that move the distributed runner's topics into the store, the alert sinks and the
actuator."""
