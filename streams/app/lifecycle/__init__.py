"""What every long-running command shares: the session (the composition root), settings and
plugins loaded once, the run recorded from its first row to its last, probes, stopping, where
the store and the bus are."""
