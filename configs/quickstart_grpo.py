"""Plain GRPO on the quickstart task: one-stage sampling, group baseline, no HA-DW.

  python experiments/launch.py --config configs/quickstart_grpo.py --workdir runs/quickstart_grpo

Hardware: 2 CPU cores, about 2–3 minutes. The reference point for configs/quickstart.py.
Measured (README): held-out pass@1 0.192 → 0.376 [0.319, 0.433] after 200 steps.
"""

from grpo_jax.config import base_config
from grpo_jax.config.files import parse_arg

# The names get_config(arg) reads (``<this file>:name=value,...``); any other is an error.
ARGS = ("steps",)


def get_config(arg=None):
  cfg = base_config()
  cfg.steps = int(parse_arg(arg, ARGS).get("steps", 200))
  # Each group's prompt through the model once in the update (same gradients up to rounding),
  # and the gradient accumulated over chunks of 64 rows (8 groups), which stay in this CPU's
  # caches (docs/performance.md).
  cfg.loss.share_prompt = True
  cfg.loss.micro_batch_size = 64
  return cfg
