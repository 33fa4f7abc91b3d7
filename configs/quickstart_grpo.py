"""Plain GRPO on the quickstart task: one-stage sampling, group baseline, no HA-DW.

  python experiments/launch.py --config configs/quickstart_grpo.py --workdir runs/quickstart_grpo

Hardware: 2 CPU cores, about 5 minutes. The reference point for configs/quickstart.py.
Measured (README): held-out pass@1 0.193 → 0.376 [0.319, 0.427] after 200 steps.
"""

from grpo_jax.config import base_config
from grpo_jax.config_file import parse_arg


def get_config(arg=None):
  cfg = base_config()
  cfg.steps = int(parse_arg(arg).get("steps", 200))
  return cfg
