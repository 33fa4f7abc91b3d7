"""What both samplers share (``sampler``: one batch over a growing cache; ``continuous``: a
fixed number of decode slots refilled as rows finish): the cache's growth steps, the output
struct, the per-step uniforms and the stop test.
"""

from __future__ import annotations

import dataclasses
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


@dataclasses.dataclass(frozen=True)
class Decode:
  """Everything static about one sampler program (a ``jax.jit`` static argument: one compile
  per distinct value, with the graphdef and the shapes).

  At most ``max_new_tokens`` T tokens per row; a row stops at the first of its stop ids
  (``eos_id``: an int or a tuple, e.g. EOS and a preview delimiter; the stop token is kept,
  mask 1) and is padded with ``pad_id`` after. ``temperature`` 0 is greedy (log-probs then
  under τ = 1); ``top_k`` 0 and ``top_p`` 1 switch truncation off. ``first_bucket``: the cache
  starts at P + first_bucket slots and doubles (:data:`FIRST_BUCKET`; 0: one cache of P + T).
  ``prompt_share`` > 1: the rows come in aligned runs of that many identical prompts, each
  run's prompt prefilled once. ``decode_slots`` S in (0, N): continuous batching over
  ``row_blocks`` equal consecutive blocks of rows (one per device of the batch axes), each with
  S / row_blocks slots; 0 or S ≥ N: one loop over all rows.
  """

  max_new_tokens: int
  eos_id: int | tuple[int, ...]
  pad_id: int
  temperature: float = 1.0
  top_k: int = 0
  top_p: float = 1.0
  first_bucket: int = FIRST_BUCKET
  prompt_share: int = 1
  decode_slots: int = 0
  row_blocks: int = 1

  def __post_init__(self):
    eos = self.eos_id
    eos = tuple(int(i) for i in eos) if isinstance(eos, tuple | list) else int(eos)
    object.__setattr__(self, "eos_id", eos)
    ints = ("max_new_tokens", "pad_id", "top_k", "first_bucket", "prompt_share", "decode_slots")
    for name in (*ints, "row_blocks"):
      object.__setattr__(self, name, int(getattr(self, name)))
    object.__setattr__(self, "temperature", float(self.temperature))
    object.__setattr__(self, "top_p", float(self.top_p))
    if self.max_new_tokens < 1:
      raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
    if self.prompt_share < 1:
      raise ValueError(f"prompt_share = {self.prompt_share} must be >= 1 and divide the rows")
    if self.decode_slots < 0:
      raise ValueError(f"decode_slots = {self.decode_slots} must be >= 0")
    if self.temperature < 0 or not 0.0 < self.top_p <= 1.0 or self.top_k < 0:
      raise ValueError(
        f"bad sampling settings: temperature={self.temperature}, top_k={self.top_k}, "
        f"top_p={self.top_p}"
      )


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


__all__ = ["FIRST_BUCKET", "Decode", "SampleOutput", "cache_buckets", "is_stop", "step_uniforms"]
