"""Train state, the jitted update, the RL loop, checkpoints and metrics.

``grpo_jax.train.train`` is resolved lazily so the light pieces (state, metrics, rollout) import
without pulling in the whole loop (and the evaluation runner it uses).
"""

from grpo_jax.train.state import init_state, step_keys


def __getattr__(name):
  if name == "train":
    from grpo_jax.train.loop import train

    return train
  raise AttributeError(f"module 'grpo_jax.train' has no attribute {name!r}")


__all__ = ["train", "init_state", "step_keys"]
