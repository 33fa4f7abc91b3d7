"""A seconds-scale sweep for tests and notebooks: tiny_test.py with strategy sampling, 4 runs.

  python experiments/launch.py --config configs/tiny_sweep.py --sweep --workdir /tmp/tiny_sweep
  python experiments/aggregate.py /tmp/tiny_sweep

Two conditions (Strategy-GRPO anchor α = 0; α = −0.5 with HA-DW) × seeds 0 and 1, 3 RL steps
each, no warm start: exercises sweep expansion, run directories, aggregation and the notebooks,
not the methods (nothing is learnt in 3 steps).
"""

import pathlib

from grpo_jax.config.files import load_module

_TINY = load_module(str(pathlib.Path(__file__).with_name("tiny_test.py")))
ARGS = _TINY.ARGS  # the arguments of the file it extends


def get_config(arg=None):
  cfg = _TINY.get_config(arg)
  cfg.steps = 3
  cfg.logging.tensorboard = False
  cfg.logging.plot = False
  # Two plans per prompt, two completions each (G = 4).
  cfg.strategy.enabled = True
  cfg.strategy.num_previews = 2
  cfg.strategy.max_preview_tokens = 4
  cfg.advantage.baseline = "subgroup_offset"
  return cfg


def sweep(add):
  for seed in (0, 1):
    add(seed=seed, **{"advantage.offset_coef": 0.0, "hadw.enabled": False})
    add(seed=seed, **{"advantage.offset_coef": -0.5, "hadw.enabled": True})
