"""grpo_jax: GRPO-family reinforcement learning for language models with verifier rewards.

Shape key used in tensor names throughout (e.g. ``rewards_N``, ``logps_NxT``):

  B prompts per step · G rollouts per prompt · N = B·G rows · K strategy subgroups per prompt
  P prompt tokens · T completion tokens · L = P + T · V vocab · D model width · H heads.
"""

__version__ = "0.1.0"
