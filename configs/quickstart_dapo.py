"""Quickstart with DAPO's loss and batch shaping (clip-higher, token mean, dynamic sampling,
soft overlong punishment) on the built-in countdown task, on CPU.

  python experiments/launch.py --config configs/quickstart_dapo.py --workdir runs/qs_dapo

Hardware: 2 CPU cores, ~10-15 minutes (dynamic sampling draws 1.5× the prompts and may
resample). The optimizer stays at quickstart scale (the paper's lr 1e-6 is for billion-parameter
models; ``grpo_jax.config.recipes.dapo`` applies it). Expected: like configs/quickstart.py, with
``dapo/kept_groups`` near B and ``dapo/rounds`` mostly 1 in metrics.jsonl.
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
  recipes.dapo_loss(cfg)
  recipes.no_kl(cfg)
  # Fewer, cheaper rounds than the paper's 3× / 10 at this scale.
  recipes.dynamic_sampling(cfg, oversample=1.5, max_rounds=3)
  # The last 3 of 12 generated tokens are the punishment zone.
  recipes.overlong(cfg, buffer=3)
  return cfg
