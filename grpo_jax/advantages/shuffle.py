"""The offset-shuffle ablation (METHODS §1 statement 5, the offset method's control experiment;
``advantage.offset_control = 'shuffle'``).

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
  n = subgroup_group_S.shape[0]
  slot_S = jnp.arange(n, dtype=jnp.int32)
  block_S = subgroup_group_S if scope == "prompt" else jnp.zeros_like(subgroup_group_S)
  block_S = jnp.where(subgroup_valid_S, block_S, n)  # empty slots sort last, among themselves
  key_S = jax.random.uniform(rng, (n,))
  canonical = jnp.lexsort((slot_S, block_S))
  shuffled = jnp.lexsort((key_S, block_S))
  src_S = jnp.zeros((n,), jnp.int32).at[canonical].set(shuffled.astype(jnp.int32))
  return jnp.where(subgroup_valid_S, src_S, slot_S)


def recentring_mean(
  offset_S: jax.Array,
  count_S: jax.Array,
  src_S: jax.Array,
  subgroup_group_S: jax.Array,
  subgroup_valid_S: jax.Array,
  scope: str,
) -> jax.Array:
  """Per group slot, the mean over its rows of the shuffled offsets: (1/n_g)·Σ_{s∈g} n_s·δ_π(s).

  Subtracting it from every row's shuffled offset makes Σ_{i∈g} b_i = Σ_{i∈g} r_i again. It is
  written with Σ_{s∈g} n_s·δ_s = 0 folded in, so that it is 0 bit for bit whenever it is 0 in
  exact arithmetic for the usual reason: ``prompt`` scope sums (n_s − n_π(s))·δ_π(s), which
  vanishes when offsets only move between equal-sized subgroups (every G/K-balanced prompt);
  ``batch`` scope sums n_s·(δ_π(s) − δ_s), which vanishes for subgroups that kept their offset.
  A float mean of the row offsets would leave ~1e-8 there, which scale_of='advantages' then
  divides by σ(Ã) + ε ≈ 1e-6 into a visible advantage. Shapes: S slots in, S group slots out.
  """
  moved_S = offset_S[src_S]
  if scope == "prompt":
    weighted_S = (count_S - count_S[src_S]) * moved_S
  else:
    weighted_S = count_S * (moved_S - offset_S)
  sum_G = seg.seg_sum(weighted_S, subgroup_group_S, subgroup_valid_S)
  count_G = seg.seg_sum(count_S, subgroup_group_S, subgroup_valid_S)
  return sum_G / jnp.maximum(count_G, 1.0)
