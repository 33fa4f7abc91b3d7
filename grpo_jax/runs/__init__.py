"""Runs of the loop: the launcher, sweeps (local and Ray), run-directory paths, aggregation and
the study's statistics (power, Holm, bias)."""
