"""Acting: the one way gpufrag changes a cluster. The actuator's typed requests, each API call's
bounded retries, evictions, node cordons and taints, and the Lease that allows one actuator."""
