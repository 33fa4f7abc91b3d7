"""Prompt sources: the task registry (``build_task``), the built-in Countdown task and its
character tokenizer, and the math datasets (``data.math``). The strategy presample store is
``grpo_jax.strategy.presample``."""

from grpo_jax.data.countdown import CountdownTask, Problem
from grpo_jax.data.registry import TASKS, build_task
from grpo_jax.data.tokenizer import build_tokenizer

__all__ = [
  "CountdownTask",
  "Problem",
  "TASKS",
  "build_task",
  "build_tokenizer",
]
