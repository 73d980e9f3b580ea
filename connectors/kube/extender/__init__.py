"""kube-scheduler's extender protocol: its JSON read into gpufrag's models, answers written in
the scheduler's types, and the binding an extender with a bind verb must create itself."""
