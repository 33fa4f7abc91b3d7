"""Subgroup offsets, positive direction (α = +0.5) on strategy-conditioned rollouts.

  python experiments/launch.py --config configs/strategy_offset_pos.py --workdir runs/strat_pos

Hardware: 2 CPU cores, under 10 minutes. Everything else as ``strategy_offset_neg.py`` (the
same presampled plans, K = 4, G = 8, single-stage evaluation); only α differs:
credit leans toward a rollout's standing inside its plan.
Expected: ``adv/offset_abs_mean`` above 0.05; compare pass@k with strategy_anchor.py.
"""

import pathlib

from grpo_jax.config.files import load_module, parse_arg

_BASE = load_module(str(pathlib.Path(__file__).with_name("strategy_offset_neg.py")))
ARGS = _BASE.ARGS  # the arguments of the file it extends


def get_config(arg=None):
  args = {"alpha": "0.5", **parse_arg(arg, ARGS)}
  return _BASE.get_config(",".join(f"{k}={v}" for k, v in args.items()))
