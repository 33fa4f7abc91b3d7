"""Jitted KV-cache sampling with per-token log-probs, and the Policy handle that rollouts and
evaluation share. Strategy-conditioned (two-stage) sampling lives in ``grpo_jax.strategy``."""

from grpo_jax.sampling.generate import generate
from grpo_jax.sampling.kv_cache import KVCache, decode_step, prefill
from grpo_jax.sampling.next_token import categorical, inverse_cdf, row_uniforms, sample_next_token
from grpo_jax.sampling.policy import Policy, SampleSettings
from grpo_jax.sampling.sampler import sample
from grpo_jax.sampling.steps import Decode, SampleOutput

__all__ = [
  "categorical",
  "Decode",
  "KVCache",
  "Policy",
  "SampleOutput",
  "SampleSettings",
  "decode_step",
  "generate",
  "inverse_cdf",
  "prefill",
  "row_uniforms",
  "sample",
  "sample_next_token",
]
