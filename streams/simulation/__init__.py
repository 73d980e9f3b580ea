"""The simulated cluster: a trace replayed as the events a real cluster would produce, with the
core's placement policies standing in for kube-scheduler. A source, so it sits above the core
and beside the connectors it reads traces through."""
