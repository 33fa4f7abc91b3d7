"""The launcher: one experiment from a config file, with ``--config.key=value`` overrides.

  python experiments/launch.py --config configs/quickstart.py [--workdir DIR] [--config.steps=20]

Modes, sweeps, pods, Ray and multi-host flags: ``--help`` and ``grpo_jax.runs.launcher``.
Exit status: 0 done, 2 config error, 75 preempted (the same command resumes).
"""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from grpo_jax.runs.launcher import main, parse_args, results_table  # noqa: E402

__all__ = ["main", "parse_args", "results_table"]

if __name__ == "__main__":
  sys.exit(main(sys.argv[1:], script=__file__))
