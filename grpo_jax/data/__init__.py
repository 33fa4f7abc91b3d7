"""Prompt sources: the built-in Countdown task and its character tokenizer."""

from grpo_jax.data.countdown import CountdownTask, Problem
from grpo_jax.data.tokenizer import build_tokenizer

__all__ = ["CountdownTask", "Problem", "build_tokenizer"]
