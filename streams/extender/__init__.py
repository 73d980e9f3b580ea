"""kube-scheduler's extender: filter, prioritize, bind and preempt answered from the cluster view,
with no clock and no I/O (the HTTP server is ``streams.app.extender``)."""
