"""The command line's plumbing: shared options, one-line errors for what a user can fix, bad
settings in one line each, terminal-safe text, input files read with a bound."""
