"""HA-DW on the quickstart task: anchor kinds and the paper's fixed-anchor ablation, on CPU.

  python experiments/launch.py --config configs/quickstart_hadw.py --workdir runs/hadw
  python experiments/launch.py --config configs/quickstart_hadw.py:anchor=fixed,c=0.4 ...
  python experiments/launch.py --config configs/quickstart_hadw.py:enabled=0 ...  # GRPO control

Arguments (all optional): ``enabled`` (1), ``anchor`` (window | kalman | fixed), ``c`` (the fixed
anchor, 0.4 / 0.5 / 0.6 in the paper's ablation), ``lam`` (λ, 1.3), ``steps`` (60).
Hardware: 2 CPU cores, a few minutes. Paper reference (Qwen3-4B/8B-Base, MATH): HA-DW adds about
+1-3 points of average accuracy over GRPO; fixed anchors trail the adaptive one (arXiv 2601.08521,
Tables 1 and 3).
"""

from grpo_jax.config import base_config
from grpo_jax.config.files import parse_arg

# The names get_config(arg) reads (``<this file>:name=value,...``); any other is an error.
ARGS = ("steps", "enabled", "anchor", "c", "lam")


def get_config(arg=None):
  args = parse_arg(arg, ARGS)
  cfg = base_config()
  cfg.steps = int(args.get("steps", 60))
  cfg.hadw.enabled = bool(int(args.get("enabled", 1)))
  cfg.hadw.anchor = args.get("anchor", "window")
  cfg.hadw.fixed_anchor = float(args.get("c", 0.5))
  cfg.hadw.lambda_scale = float(args.get("lam", 1.3))
  return cfg
