"""The sign-keeping magnitude scramble, a control of the offset ablation
(``advantage.offset_control = 'magnitude_scramble'``).

Inside every prompt the magnitudes of the non-zero offsets are permuted among the subgroups
that have one, and each subgroup keeps its own sign:

  δ'_s = sgn(δ_s)·|δ_π(s)|,   π a uniform permutation of the prompt's subgroups with δ_s ≠ 0,

so every offset still points the way the subgroup's own does, the prompt's multiset {|δ_s|} is
kept, and only the pairing of a subgroup with its size of offset is broken (a subgroup with
δ_s = 0 keeps 0; a prompt whose non-zero offsets share one magnitude is unchanged). The
baseline is b_i = μ_g + α·δ'_{s(i)}.

Σ_{s∈g} n_s δ'_s is in general no longer 0, so the advantages of a prompt stop summing to 0.
``rebalance`` (on by default) restores the sum without touching a sign: each side is scaled
back to the real offsets' mass on that side,

  δ''_s = δ'_s · P_g / P'_g  (δ_s > 0),   δ''_s = δ'_s · N_g / N'_g  (δ_s < 0),
  P_g = Σ_{s∈g, δ_s>0} n_s|δ_s|,  P'_g = Σ_{s∈g, δ_s>0} n_s|δ_π(s)|  (N_g, N'_g: δ_s < 0),

so Σ_s n_s δ''_s = P_g − N_g = Σ_s n_s δ_s = 0, that is Σ_{i∈g} b_i = Σ_{i∈g} r_i, and
the factors are exactly 1 when no magnitude moved. Subtracting the row mean instead (the
shuffle's ``recenter``) would not keep the signs: with K = 4 subgroups of 2 rows and 0/1
rewards it sets 15–28% of the non-zero offsets to 0 (solve rates 0.1–0.5).

Why this control: the shuffle (``shuffle.py``) gives each subgroup another subgroup's offset and
the matched noise (``noise.py``) a random one; with equal subgroup sizes both have mean 0 and
covariance RMS²·(K·I − 11ᵀ)/(K − 1) given the rewards, so they cannot differ in expectation.
The scramble keeps the direction: E_π[δ'_s] = sgn(δ_s)·mean{|δ_t| : δ_t ≠ 0}. Offsets whose
information is their sign alone train as the real ones do under it; offsets whose magnitude
matters train worse.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from grpo_jax.advantages import segments as seg
from grpo_jax.advantages.shuffle import offset_permutation

# |δ| at or below this is a zero offset (rounding of μ_s − μ_g for rewards in [0, 1]): it
# neither gives nor takes a magnitude.
ZERO_OFFSET = 2.0**-20


def magnitude_scramble(
  rng: jax.Array,
  offset_S: jax.Array,
  count_S: jax.Array,
  subgroup_group_S: jax.Array,
  subgroup_valid_S: jax.Array,
  rebalance: bool = True,
) -> jax.Array:
  """δ' (δ'' with ``rebalance``) per subgroup slot, see the module docstring; empty slots 0.
  Shapes: S -> S."""
  valid_S = subgroup_valid_S
  size_S = jnp.abs(offset_S)
  moving_S = valid_S & (size_S > ZERO_OFFSET)
  src_S = offset_permutation(rng, subgroup_group_S, moving_S, "prompt")
  sign_S = jnp.where(moving_S, jnp.sign(offset_S), 0.0)
  scrambled_S = jnp.where(moving_S, sign_S * size_S[src_S], offset_S)
  if rebalance:
    group_S = jnp.maximum(subgroup_group_S, 0)
    for side_S in (moving_S & (sign_S > 0), moving_S & (sign_S < 0)):
      real_G = seg.seg_sum(count_S * size_S, subgroup_group_S, side_S)
      moved_G = seg.seg_sum(count_S * size_S[src_S], subgroup_group_S, side_S)
      factor_G = real_G / jnp.where(moved_G > 0, moved_G, 1.0)
      scrambled_S = jnp.where(side_S, scrambled_S * factor_G[group_S], scrambled_S)
  return jnp.where(valid_S, scrambled_S, 0.0)
