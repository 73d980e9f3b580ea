"""Planners: signals and the cluster view in, proposed actions out, each proven by a what-if."""
