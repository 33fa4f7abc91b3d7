"""The launcher: one experiment from a config file, with ``--config.key=value`` overrides.

  python experiments/launch.py --config configs/quickstart.py [--workdir DIR] [--config.steps=20]

Modes, sweeps, pods, Ray and multi-host flags: ``--help`` and ``grpo_jax.runs.launcher``.
Exit status: 0 done, 2 config error, 75 preempted (the same command resumes).
"""

import sys

from grpo_jax.runs.launcher import main, parse_args
from grpo_jax.runs.modes import results_table

__all__ = ["main", "parse_args", "results_table"]

if __name__ == "__main__":
  sys.exit(main(sys.argv[1:], script=__file__))
