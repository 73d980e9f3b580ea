"""What `gpufrag watch` runs: live sources, their stages, and the two buses."""
