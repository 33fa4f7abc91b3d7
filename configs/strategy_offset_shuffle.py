"""Shuffle ablation: α = −0.5 with each prompt's offsets permuted across its plans.

  python experiments/launch.py --config configs/strategy_offset_shuffle.py --workdir runs/strat_shuf

Hardware: 2 CPU cores, under 10 minutes. Everything else as ``strategy_offset_neg.py`` (the
same presampled plans, K = 4, G = 8, single-stage evaluation); only the offsets
δ_s are randomly permuted among a prompt's plans each step (METHODS §1 statement 5).
Expected: no better than strategy_anchor.py (the pairing of plan and offset is what matters).
"""

import pathlib

from grpo_jax.config.files import load_module, parse_arg

_BASE = load_module(str(pathlib.Path(__file__).with_name("strategy_offset_neg.py")))
ARGS = _BASE.ARGS  # the arguments of the file it extends


def get_config(arg=None):
  args = {"alpha": "-0.5", "shuffle": "1", **parse_arg(arg, ARGS)}
  return _BASE.get_config(",".join(f"{k}={v}" for k, v in args.items()))
