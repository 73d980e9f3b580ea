"""A simulated kube-scheduler: cluster state, pluggable placement policies, and the FGD protocol.

The trace source drives it to produce the events a real cluster would (pods bound or left
pending with FailedScheduling); capacity planners use it for what-if replays of policies.
"""
