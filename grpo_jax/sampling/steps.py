"""What both samplers share (``sampler``: one batch over a growing cache; ``continuous``: a
fixed number of decode slots refilled as rows finish): the cache's growth steps, the output
struct, the per-step uniforms and the stop test.
"""

from __future__ import annotations

import functools

import flax.struct
import jax
import jax.numpy as jnp

from grpo_jax.sampling.next_token import row_uniforms

# Decode runs in loops over caches of P + 64, P + 128, P + 256 … P + T slots, so that every
# step attends over at most twice the slots written so far instead of all P + T (each loop is
# compiled separately: log2(T / 64) + 1 bodies). 0 = one loop over a P + T cache.
FIRST_BUCKET = 64


def cache_buckets(max_new_tokens: int, first: int) -> list[int]:
  """Token counts at which the cache grows: first, 2·first, 4·first … and finally T."""
  limits, t = [], first if first > 0 else max_new_tokens
  while t < max_new_tokens:
    limits.append(t)
    t *= 2
  return [*limits, max_new_tokens]


@flax.struct.dataclass
class SampleOutput:
  tokens_NxT: jax.Array  # int32; pad_id after a row's first EOS
  mask_NxT: jax.Array  # int32; 1 for generated tokens up to and including the first EOS
  logps_NxT: jax.Array  # float32; log π(token) under logits / τ, 0 where mask is 0
  lengths_N: jax.Array  # int32; number of valid tokens (Σ_t mask)
  truncated_N: jax.Array  # bool; no EOS within max_new_tokens
  decode_steps: jax.Array  # int32 scalar; decode-loop iterations run (``waste.decode_waste``)


def step_uniforms(rng: jax.Array, num_steps: int, num_rows: int) -> jax.Array:
  """uniform_TxN: row t is ``row_uniforms(fold_in(rng, t), N)``, the draws of token t, all made
  up front (one vectorised threefry instead of one small one inside every decode step)."""
  steps_T = jnp.arange(num_steps, dtype=jnp.uint32)
  return jax.vmap(lambda t: row_uniforms(jax.random.fold_in(rng, t), num_rows))(steps_T)


def is_stop(token_N: jax.Array, eos_id) -> jax.Array:
  """token ∈ stop ids: ``eos_id`` is an int or a static tuple of them (e.g. EOS and a preview
  delimiter)."""
  stop_ids = eos_id if isinstance(eos_id, tuple) else (eos_id,)
  return functools.reduce(jnp.logical_or, [token_N == s for s in stop_ids])


__all__ = ["FIRST_BUCKET", "SampleOutput", "cache_buckets", "is_stop", "step_uniforms"]
