"""Plain GRPO on the quickstart task: one-stage sampling, group baseline, no HA-DW.

  python experiments/launch.py --config configs/quickstart_grpo.py --workdir runs/quickstart_grpo

Hardware: 2 CPU cores, a few minutes. The reference point for configs/quickstart.py:
``configs/quickstart_compare.py`` runs both (this at ``steps=150``, the quickstart's budget) and
the Strategy-GRPO anchor on one seed. Measured there (docs/results/2026-12-02_quickstart.md,
one CPU with AVX-512): held-out pass@1 0.192 → 0.387 [0.332, 0.441], pass@8 0.695 → 0.565
after 150 steps.
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
  # caches (docs/results/2026-12-02_performance.md).
  cfg.loss.share_prompt = True
  cfg.loss.micro_batch_size = 64
  return cfg
