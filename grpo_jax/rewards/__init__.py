"""Host-side reward functions (pure Python; they run outside jit)."""

from grpo_jax.rewards.countdown import (
  DELIMITER,
  all_patterns,
  countdown_reward,
  describe_pattern,
  enumerate_expressions,
  evaluate,
  parse_expression,
  plan_of,
  split_completion,
)

__all__ = [
  "DELIMITER",
  "all_patterns",
  "countdown_reward",
  "describe_pattern",
  "enumerate_expressions",
  "evaluate",
  "parse_expression",
  "plan_of",
  "split_completion",
]
