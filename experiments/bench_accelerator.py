"""``python experiments/bench_accelerator.py ARGS`` runs ``python -m
experiments.benchmarks.accelerator ARGS`` (the accelerator benchmark; see its docstring) from
the repository root."""

import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]

if __name__ == "__main__":
  os.chdir(ROOT)
  argv = [sys.executable, "-m", "experiments.benchmarks.accelerator", *sys.argv[1:]]
  os.execv(sys.executable, argv)
