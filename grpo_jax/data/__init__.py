"""Prompt sources: the task registry (``build_task``), the built-in Countdown task and its
character tokenizer, and the math datasets (``data.math``)."""

from grpo_jax.data.countdown import CountdownTask, Problem
from grpo_jax.data.presample import (
  PresampledPreviews,
  PresampleError,
  load_presample,
  write_presample,
)
from grpo_jax.data.registry import TASKS, build_task
from grpo_jax.data.tokenizer import build_tokenizer

__all__ = [
  "CountdownTask",
  "PresampleError",
  "PresampledPreviews",
  "Problem",
  "TASKS",
  "build_task",
  "build_tokenizer",
  "load_presample",
  "write_presample",
]
