"""Quickstart with GSPO's sequence-level ratio (clip 3e-4 / 4e-4, seq_mean_token_mean) on the
built-in countdown task, on CPU.

  python experiments/launch.py --config configs/quickstart_gspo.py --workdir runs/qs_gspo

Hardware: 2 CPU cores, under 10 minutes. The optimizer stays at quickstart scale
(``grpo_jax.config.recipes.gspo`` applies the paper's lr 1e-6 / wd 0.1). With one on-policy
update per batch the ratio is 1 and the narrow clip never bites; ``loss.num_minibatches=2``
(set here) makes the second step off-policy so ``clip/*_frac`` shows the clip at work.
``get_config("steps=20")`` shrinks the run.
"""

from grpo_jax.config import base_config, recipes
from grpo_jax.config.files import parse_arg

# The names get_config(arg) reads (``<this file>:name=value,...``); any other is an error.
ARGS = ("steps",)


def get_config(arg=None):
  cfg = base_config()
  args = parse_arg(arg, ARGS)
  cfg.steps = int(args.get("steps", 60))
  recipes.gspo_loss(cfg)
  recipes.no_kl(cfg)
  # Two optimizer steps per batch (32 prompts each), old log-probs fixed before the first.
  cfg.loss.num_minibatches = 2
  return cfg
