"""A seconds-scale config for tests: tiny model, few prompts, 2 RL steps, no warm start.

python experiments/launch.py --config configs/tiny_test.py --workdir /tmp/tiny
"""

from grpo_jax.config import base_config
from grpo_jax.config.files import parse_arg

ARGS = ()  # get_config takes no argument; any is an error


def get_config(arg=None):
  parse_arg(arg, ARGS)
  cfg = base_config()
  cfg.steps = 2
  cfg.model.hidden_dim = 32
  cfg.model.num_layers = 2
  cfg.model.num_heads = 2
  cfg.model.num_kv_heads = 1
  cfg.model.head_dim = 16
  cfg.model.mlp_dim = 64
  cfg.sampling.prompts_per_step = 8
  cfg.sampling.group_size = 4
  cfg.warmstart.enabled = False
  cfg.eval.num_problems = 8
  cfg.eval.num_samples = 4
  cfg.eval.ks = (1, 4)
  cfg.checkpoint.every = 1
  cfg.logging.progress = False
  return cfg
