"""Evaluation: pass@k / maj@k estimators and bootstrap confidence intervals."""

from grpo_jax.eval.passk import bootstrap_ci, maj_at_k, pass_at_k, pass_at_k_array, summarize

__all__ = ["bootstrap_ci", "maj_at_k", "pass_at_k", "pass_at_k_array", "summarize"]
