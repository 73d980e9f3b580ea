"""Extension tests: a toy component of each kind registered with one line, no product edit."""
