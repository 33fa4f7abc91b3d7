"""Prompt sources: the built-in Countdown task and its character tokenizer."""

from grpo_jax.data.countdown import CountdownTask, Problem
from grpo_jax.data.presample import (
  PresampledPreviews,
  PresampleError,
  load_presample,
  write_presample,
)
from grpo_jax.data.tokenizer import build_tokenizer

__all__ = [
  "CountdownTask",
  "PresampleError",
  "PresampledPreviews",
  "Problem",
  "build_tokenizer",
  "load_presample",
  "write_presample",
]
