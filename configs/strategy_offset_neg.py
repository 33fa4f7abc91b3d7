"""Subgroup offsets, negative direction (α = −0.5) on strategy-conditioned countdown rollouts.

  python experiments/launch.py --config configs/strategy_offset_neg.py --workdir runs/strat_neg

Hardware: 2 CPU cores, under 10 minutes (the quickstart plus a few seconds of presampling).
What it does: the quickstart's warm start, then K = 4 plans per prompt drawn once by the
warm-started policy (``<workdir>/presample``), G = 8 completions per prompt (2 per plan), and
the baseline μ_g + α·δ_s (METHODS §1, seed ``000_…``): α < 0 tilts credit toward the plan's
quality. Evaluation is single-stage. Expected: ``adv/offset_abs_mean`` well above 0.05 and
held-out pass@1 above the warm start; ``strategy_previews.json`` lists per-plan success rates.

``get_config("alpha=-1,hadw=1,shuffle=1,source=online,steps=20")`` changes α, adds HA-DW (the
full method), permutes the offsets across plans (the ablation, advantage.offset_control =
'shuffle'), lets the current policy write the plans every step, or shortens the run. Variants:
strategy_anchor.py (α = 0), strategy_offset_pos.py (α = +0.5), strategy_offset_shuffle.py
(α = −0.5, shuffled offsets).
"""

from grpo_jax.config import base_config
from grpo_jax.config.files import parse_arg

# The names get_config(arg) reads (``<this file>:name=value,...``); any other is an error.
ARGS = ("steps", "source", "alpha", "shuffle", "hadw")
ALPHA = -0.5


def get_config(arg=None):
  args = parse_arg(arg, ARGS)
  cfg = base_config()
  cfg.steps = int(args.get("steps", 60))
  # Two-stage sampling: K plans of at most 2 operators + ';' per prompt, presampled once.
  cfg.strategy.enabled = True
  cfg.strategy.num_previews = 4
  cfg.strategy.source = args.get("source", "presampled")
  cfg.strategy.max_preview_tokens = 4
  cfg.strategy.delimiter = ";"
  # b_i = μ_g + α·δ_s over plan subgroups; α = 0 is the Strategy-GRPO anchor.
  cfg.advantage.baseline = "subgroup_offset"
  cfg.advantage.offset_coef = float(args.get("alpha", ALPHA))
  cfg.advantage.offset_control = "shuffle" if int(args.get("shuffle", 0)) else "none"
  cfg.hadw.enabled = bool(int(args.get("hadw", 0)))
  return cfg
