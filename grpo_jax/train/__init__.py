"""Train state, the jitted update, the RL loop, checkpoints and metrics."""

from grpo_jax.train.loop import train
from grpo_jax.train.state import init_state, step_keys

__all__ = ["train", "init_state", "step_keys"]
