"""Strategy-GRPO anchor: strategy-conditioned rollouts, plain group baseline (α = 0).

  python experiments/launch.py --config configs/strategy_anchor.py --workdir runs/strat_anchor

Hardware: 2 CPU cores, under 10 minutes. Everything else as ``strategy_offset_neg.py`` (the
same presampled plans, K = 4, G = 8, single-stage evaluation); only the baseline
differs: α = 0 gives b_i = μ_g exactly (METHODS §1 statement 1).
Expected: the reference the offset runs are compared with (pass@1/pass@8 after RL).
"""

import pathlib

from grpo_jax.config.files import load_module, parse_arg

_BASE = load_module(str(pathlib.Path(__file__).with_name("strategy_offset_neg.py")))
ARGS = _BASE.ARGS  # the arguments of the file it extends


def get_config(arg=None):
  args = {"alpha": "0.0", **parse_arg(arg, ARGS)}
  return _BASE.get_config(",".join(f"{k}={v}" for k, v in args.items()))
