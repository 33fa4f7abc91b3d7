"""Train state, the jitted update, the RL step and the modes over an open run, checkpoints and
metrics.

``grpo_jax.train.train`` is resolved lazily so the light pieces (state, metrics, rollout) import
without pulling in the whole run (and the evaluation runner it uses).
"""

from grpo_jax.train.state import TrainState, init_state, step_keys


def __getattr__(name):
  if name == "train":
    from grpo_jax.train.modes import train

    return train
  raise AttributeError(f"module 'grpo_jax.train' has no attribute {name!r}")


__all__ = ["TrainState", "init_state", "step_keys", "train"]
