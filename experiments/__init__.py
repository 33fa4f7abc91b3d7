"""Scripts around the library: the launcher (``launch.py``), the analysis scripts and the
benchmarks (``experiments.benchmarks``). Run from the repository root."""
