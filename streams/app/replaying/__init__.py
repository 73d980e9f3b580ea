"""What `gpufrag replay` needs besides the runner: the trace as simulator input, the actions
loop, the summary."""
