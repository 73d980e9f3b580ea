"""`gpufrag extender`: the HTTP side of kube-scheduler's extender, over the embedded pipeline's
live view (``streams.extender`` decides; ``connectors.kube.extender`` speaks the protocol)."""
