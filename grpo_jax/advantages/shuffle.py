"""The offset-shuffle ablation (METHODS §1 statement 5, seed 000's control experiment).

The offsets {δ_s} are permuted across subgroups before they enter the baseline, which keeps
their multiset but breaks the pairing of a subgroup with its own offset:

  b_i = μ_g + α·δ_{π(s(i))}

``scope='prompt'`` draws a fresh uniform permutation inside every prompt (subgroups never trade
offsets with another prompt); ``scope='batch'`` permutes across all subgroups of the step. With
unequal subgroup sizes Σ_i b_i ≠ Σ_i r_i afterwards; ``recenter`` subtracts the group mean of the
row-level offsets so advantages are zero-sum per prompt again (off by default, as METHODS pins).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from grpo_jax.advantages import segments as seg

SCOPES = ("prompt", "batch")


def offset_permutation(
  rng: jax.Array, subgroup_group_S: jax.Array, subgroup_valid_S: jax.Array, scope: str
) -> jax.Array:
  """Source slot per subgroup slot: subgroup s takes the offset of subgroup ``src_S[s]``.

  Sorting the slots by (block, slot) and by (block, uniform key) lists each block's slots in
  the same positions, once in id order and once in a uniformly random order; pairing the two
  lists is a uniform permutation inside every block, with one sort and no per-group loop.
  Empty slots map to themselves. Shapes: S -> S (int32).
  """
  if scope not in SCOPES:
    raise ValueError(f"advantage.offset_shuffle_scope must be one of {SCOPES}, got {scope!r}")
  n = subgroup_group_S.shape[0]
  slot_S = jnp.arange(n, dtype=jnp.int32)
  block_S = subgroup_group_S if scope == "prompt" else jnp.zeros_like(subgroup_group_S)
  block_S = jnp.where(subgroup_valid_S, block_S, n)  # empty slots sort last, among themselves
  key_S = jax.random.uniform(rng, (n,))
  canonical = jnp.lexsort((slot_S, block_S))
  shuffled = jnp.lexsort((key_S, block_S))
  src_S = jnp.zeros((n,), jnp.int32).at[canonical].set(shuffled.astype(jnp.int32))
  return jnp.where(subgroup_valid_S, src_S, slot_S)


def recenter_offsets(offset_N: jax.Array, group_ids_N: jax.Array, valid_N: jax.Array) -> jax.Array:
  """δ'_i − mean_{j∈g(i)} δ'_j, so that Σ_{i∈g} b_i = Σ_{i∈g} r_i again. Shapes: N -> N."""
  mean_N = seg.gather(seg.seg_mean(offset_N, group_ids_N, valid_N), group_ids_N, valid_N)
  return jnp.where(valid_N, offset_N - mean_N, 0.0)
