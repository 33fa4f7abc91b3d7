"""A static key/value cache and the two cached passes of the decoder: prefill and one step.

Shape letters: N rows, P prompt slots, S = P + T cache slots, Hk kv heads, Dh head width,
V vocab.

Layout: keys are stored (N, Hk, Dh, S) and values (N, Hk, S, Dh), so both decode-attention
products contract over the second-to-last axis of the cache and run along its contiguous last
axis. XLA:CPU runs q·kᵀ over (N, Hk, S, Dh) keys 12× slower than over (N, Hk, Dh, S) ones
(64 rows, 4 kv heads, 160 slots: 2.7 ms vs 0.22 ms per layer;
docs/results/2026-12-02_performance.md).

Prompts are left-padded, so every row writes its t-th new token at the same slot P + t while
its RoPE position (number of real tokens before it) differs per row.
"""

from __future__ import annotations

import flax.struct
import jax
import jax.numpy as jnp

from grpo_jax.models.shared_prompt import decode_layout, repeat_runs, run_heads
from grpo_jax.models.transformer import (
  Transformer,
  causal_mask,
  positions_from_mask,
  real_tokens,
)
from grpo_jax.sharding import rules as rules


@flax.struct.dataclass
class KVCache:
  """Per-layer keys/values over S static slots plus which slots hold real tokens."""

  # One per layer, read by decode attention without a transpose (see the module docstring);
  # in the model's compute dtype (the keys and values its projections produce).
  k_NxHkxDhxS: tuple[jax.Array, ...]
  v_NxHkxSxDh: tuple[jax.Array, ...]
  valid_NxS: jax.Array  # bool: slot holds a real (non-padding) token
  positions_N: jax.Array  # int32: RoPE position of the next token written
  # int32: slot of the next token written; a scalar (every row at the same slot), or index_N,
  # one per row (continuous batching, ``continuous.py``: rows at different lengths).
  index: jax.Array

  @property
  def num_slots(self) -> int:
    return self.valid_NxS.shape[1]

  @property
  def k_NxSxHkxDh(self) -> tuple[jax.Array, ...]:
    """The keys in token-major order (a transposed copy, for inspection)."""
    return tuple(jnp.transpose(k, (0, 3, 1, 2)) for k in self.k_NxHkxDhxS)

  @property
  def v_NxSxHkxDh(self) -> tuple[jax.Array, ...]:
    return tuple(jnp.swapaxes(v, 1, 2) for v in self.v_NxHkxSxDh)


def prefill(
  model: Transformer,
  prompt_NxP: jax.Array,
  prompt_mask_NxP: jax.Array,
  num_slots: int,
  share: int = 1,
) -> tuple[jax.Array, KVCache]:
  """Runs the prompt once; returns the next-token logits_NxV (float32) and a cache of
  ``num_slots`` ≥ P slots holding the prompt's keys and values in slots [0, P).

  Only the last position is unembedded: a P×V logits tensor is never built. ``share`` > 1:
  the rows come in aligned runs of ``share`` with the same prompt (G samples of one prompt);
  each run's prompt is run once and its logits and keys/values repeated to the run's rows.
  """
  N, P = prompt_NxP.shape
  repeat = lambda x_UxR: repeat_runs(x_UxR, share)  # both identities at share = 1
  mask_UxP = run_heads(prompt_mask_NxP, share)
  tokens_UxP = real_tokens(run_heads(prompt_NxP, share), mask_UxP)
  h_UxPxD, kvs = model(tokens_UxP, positions_from_mask(mask_UxP), causal_mask(mask_UxP))
  logits_NxV = repeat(model.logits(h_UxPxD[:, -1]))
  k_NxHkxDhxP, v_NxHkxPxDh = zip(*decode_layout(kvs, share))
  cache = KVCache(
    k_NxHkxDhxS=k_NxHkxDhxP,
    v_NxHkxSxDh=v_NxHkxPxDh,
    valid_NxS=repeat(mask_UxP.astype(bool)),
    positions_N=repeat(jnp.sum(mask_UxP.astype(jnp.int32), axis=1)),
    index=jnp.asarray(P, jnp.int32),
  )
  return logits_NxV, grow(cache, num_slots)


def grow(cache: KVCache, num_slots: int) -> KVCache:
  """The same cache with ``num_slots`` ≥ S slots: the new slots are empty (masked)."""
  extra = num_slots - cache.num_slots
  if extra < 0:
    raise ValueError(f"cannot shrink a cache of {cache.num_slots} slots to {num_slots}")
  pad = lambda x, axis: jnp.pad(x, [(0, extra) if a == axis else (0, 0) for a in range(x.ndim)])
  # Under a mesh (``sharding.activate`` / ``under_mesh``): rows over data × fsdp, kv heads over
  # tensor (the sampling preset); the decode loop's carry keeps this layout. No-op otherwise.
  keys = lambda k: rules.constrain(pad(k, 3), rules.KV_CACHE_KEYS, rules.SAMPLE)
  values = lambda v: rules.constrain(pad(v, 2), rules.KV_CACHE_VALUES, rules.SAMPLE)
  return cache.replace(
    k_NxHkxDhxS=tuple(keys(k) for k in cache.k_NxHkxDhxS),
    v_NxHkxSxDh=tuple(values(v) for v in cache.v_NxHkxSxDh),
    valid_NxS=rules.constrain(pad(cache.valid_NxS, 1), ("batch", "seq"), rules.SAMPLE),
  )


def decode_step(
  model: Transformer, token_N: jax.Array, cache: KVCache
) -> tuple[jax.Array, KVCache]:
  """Feeds one token per row at slot ``cache.index`` (shared or per row); returns next-token
  logits_NxV (float32).

  Cost is one token's projections plus attention over the S static slots (unwritten slots are
  masked; the sampler grows S in steps so it stays near the written length); the cache is
  updated in place with ``dynamic_update_slice``.
  """
  index, N = cache.index, token_N.shape[0]
  if jnp.ndim(index) == 0:
    valid_NxS = jax.lax.dynamic_update_slice(cache.valid_NxS, jnp.ones((N, 1), bool), (0, index))
  else:
    valid_NxS = cache.valid_NxS.at[jnp.arange(N), index].set(True)
  h_Nx1xD, kvs = model(
    token_N[:, None],
    cache.positions_N[:, None],
    valid_NxS[:, None, :],
    kv_caches=tuple(zip(cache.k_NxHkxDhxS, cache.v_NxHkxSxDh)),
    cache_index=index,
  )
  logits_NxV = model.logits(h_Nx1xD[:, 0])
  cache = KVCache(
    k_NxHkxDhxS=tuple(k for k, _ in kvs),
    v_NxHkxSxDh=tuple(v for _, v in kvs),
    valid_NxS=valid_NxS,
    positions_N=cache.positions_N + 1,
    index=index + 1,
  )
  return logits_NxV, cache
