"""The quickstart beside its baselines: full method, Strategy-GRPO anchor and plain GRPO.

  python experiments/launch.py --config configs/quickstart_compare.py --sweep \
      --workdir runs/quickstart_compare

Hardware: 2 CPU cores, 2–7 minutes per run (quiet or shared). Three runs on the same seed, warm
start, prompt stream and held-out draws, 150 RL steps each; at its end the sweep prints their
held-out pass@1 and pass@8 before → after RL side by side (bootstrap 95% CIs over problems):

  method=full     configs/quickstart.py: online strategy plans (K = 4, G = 8), subgroup-offset
                  baseline α = −0.5, HA-DW
  method=anchor   the same sampling, α = 0, no HA-DW (Strategy-GRPO)
  method=grpo     configs/quickstart_grpo.py:steps=150: one-stage sampling, group baseline

``method=full`` is the quickstart's config exactly, so it reproduces the quickstart's numbers on
the same CPU. docs/results/2026-12-02_quickstart.md's table is this sweep's output.
``configs/quickstart_compare.py:steps=20`` shortens every run.
"""

import pathlib

from grpo_jax.config.files import load_module, parse_arg

_HERE = pathlib.Path(__file__).parent
_QUICKSTART = load_module(str(_HERE / "quickstart.py"))
_GRPO = load_module(str(_HERE / "quickstart_grpo.py"))
# The names get_config(arg) reads (``<this file>:name=value,...``); any other is an error.
ARGS = ("steps", "method")
METHODS = ("full", "anchor", "grpo")
STEPS = 150


def get_config(arg=None):
  args = parse_arg(arg, ARGS)
  steps = f"steps={int(args.get('steps', STEPS))}"
  method = args.get("method", "full")
  if method not in METHODS:
    raise ValueError(f"method={method!r}; one of {METHODS}")
  if method == "grpo":
    return _GRPO.get_config(steps)
  cfg = _QUICKSTART.get_config(steps)
  if method == "anchor":
    cfg.advantage.offset_coef = 0.0
    cfg.hadw.enabled = False
  return cfg


def sweep(add, arg=None):
  steps = parse_arg(arg, ARGS).get("steps")
  for method in METHODS:
    add(arg=f"method={method}" + (f",steps={steps}" if steps else ""))
