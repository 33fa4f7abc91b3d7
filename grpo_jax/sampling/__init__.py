"""Jitted KV-cache sampling with per-token log-probs."""

from grpo_jax.sampling.kv_cache import KVCache, decode_step, prefill
from grpo_jax.sampling.next_token import sample_next_token
from grpo_jax.sampling.sampler import SampleOutput, sample

__all__ = ["KVCache", "SampleOutput", "decode_step", "prefill", "sample", "sample_next_token"]
