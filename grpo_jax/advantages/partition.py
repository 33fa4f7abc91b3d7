"""Does the strategy partition carry reward signal, and how much should the offsets be trusted
(METHODS §7, statements 17-19; beyond seed ``000_…``)?

Per group g with n_g valid rows in K_g subgroups of sizes n_s (one-way layout, inside the group):

  SSB_g = Σ_s n_s δ_s²,   SSW_g = Σ_i (r_i − μ_s(i))²,   SST_g = SSB_g + SSW_g,

(SST_g = Σ_i (r_i − μ_g)² in exact arithmetic; the sum of the parts makes η² exactly 1 when every
subgroup is constant and exactly 0 when every δ_s is 0). Only groups with SST_g > 0 (rewards not
all equal) and K_g ≥ 2 enter ("informative" groups, set I):

  η²_g = SSB_g / SST_g,                    null_g = (K_g − 1)/(n_g − 1)          (17)
  σ̂²_w = Σ_I SSW_g / Σ_I (n_g − K_g)                                          (18)
  τ̂²   = max(0, Σ_I [SSB_g − (K_g − 1)σ̂²_w] / Σ_I [n_g − Σ_s n_s²/n_g])
  λ_g  = τ̂² / (τ̂² + σ̂²_w/ñ_g),  ñ_g = n_g/K_g   (0 when τ̂² = 0; 1 when σ̂²_w = 0 < τ̂²)

null_g is the exact expectation of η²_g when the group's rewards are assigned to subgroups of the
same sizes uniformly at random, whatever the rewards. Scope ``'group'`` replaces τ̂² by the group's
own τ̂²_g (the same formula over g alone, with the pooled σ̂²_w). With no within-subgroup degree of
freedom in the step (Σ_I (n_g − K_g) = 0: every subgroup a singleton) σ̂²_w is not identified and
τ̂² := 0, so λ = 0. ``advantage.offset_strength = 'shrunk'`` multiplies the row offsets by λ_g(i)
(statement 19): b_i = μ_g + α·λ_g·δ_s(i). Shapes: N rows in, N slots (``_S``, by id) out.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from grpo_jax.advantages import segments as seg
from grpo_jax.advantages.offsets import GroupStats

# advantage.offset_strength: the offsets as they are (METHODS §1), or scaled by λ_g (§7.19).
STRENGTHS = ("fixed", "shrunk")
# advantage.offset_strength_scope: τ̂² pooled over the step's groups, or each group's own.
STRENGTH_SCOPES = ("batch", "group")
PARTITION_KEYS = (
  "strategy/between_share",
  "strategy/between_share_null",
  "strategy/offset_reliability",
)


class Partition(NamedTuple):
  """Per-group slot (``_S``, indexed by group id) sums of one step's partition."""

  rows_S: jax.Array  # n_g
  subgroups_S: jax.Array  # K_g, non-empty subgroups
  size_sq_S: jax.Array  # Σ_s n_s²
  between_S: jax.Array  # SSB_g
  within_S: jax.Array  # SSW_g
  informative_S: jax.Array  # SST_g > 0 and K_g ≥ 2


def partition_stats(rewards_N, group_ids_N, subgroup_ids_N, valid_N, stats: GroupStats):
  """:class:`Partition` of a step from ``offsets.group_stats``'s ``stats``. Shapes: N -> S."""
  sub_S, sub_valid_S, count_S = (
    stats.subgroup_group_S,
    stats.subgroup_valid_S,
    stats.subgroup_count_S,
  )
  per_group = lambda x_S: seg.seg_sum(x_S, sub_S, sub_valid_S)
  subgroups_S = per_group(jnp.ones_like(count_S))
  smean_N = seg.gather(seg.exact_mean(rewards_N, subgroup_ids_N, valid_N), subgroup_ids_N, valid_N)
  within_S = seg.seg_sum(jnp.square(rewards_N - smean_N), group_ids_N, valid_N)
  informative_S = stats.group_valid_S & ~stats.group_degenerate_S & (subgroups_S >= 2)
  return Partition(
    rows_S=seg.seg_count(group_ids_N, valid_N),
    subgroups_S=subgroups_S,
    size_sq_S=per_group(jnp.square(count_S)),
    between_S=per_group(count_S * jnp.square(stats.offset_S)),
    within_S=within_S,
    informative_S=informative_S,
  )


def _pooled(x_S, p: Partition):
  return jnp.sum(jnp.where(p.informative_S, x_S, 0.0))


def reliability(p: Partition, scope: str) -> jax.Array:
  """λ_g per group slot (statement 18; ``scope`` 'group': τ̂²_g of the group alone). S -> S."""
  if scope not in STRENGTH_SCOPES:
    raise ValueError(
      f"advantage.offset_strength_scope must be one of {list(STRENGTH_SCOPES)}, got {scope!r}"
    )
  df_w = _pooled(p.rows_S - p.subgroups_S, p)
  var_w = _pooled(p.within_S, p) / jnp.maximum(df_w, 1.0)
  excess_S = p.between_S - (p.subgroups_S - 1.0) * var_w
  spread_S = p.rows_S - p.size_sq_S / jnp.maximum(p.rows_S, 1.0)  # > 0 iff K_g ≥ 2
  if scope == "batch":
    num, den = _pooled(excess_S, p), _pooled(spread_S, p)
  else:
    num, den = excess_S, spread_S
  tau_sq = jnp.where((den > 0) & (df_w > 0), jnp.maximum(num / jnp.where(den > 0, den, 1.0), 0), 0)
  tau_sq_S = jnp.broadcast_to(tau_sq, p.rows_S.shape)
  noise_S = var_w * p.subgroups_S / jnp.maximum(p.rows_S, 1.0)  # σ̂²_w / ñ_g
  return jnp.where(tau_sq_S > 0, tau_sq_S / jnp.where(tau_sq_S > 0, tau_sq_S + noise_S, 1.0), 0.0)


def diagnostics(p: Partition) -> dict[str, jax.Array]:
  """:data:`PARTITION_KEYS`: means over the informative groups (0 when there are none) of η²_g,
  of its null (K_g − 1)/(n_g − 1) and of λ_g with τ̂² pooled over the step (statements 17-18)."""
  n_inf = jnp.maximum(_pooled(jnp.ones_like(p.rows_S), p), 1.0)
  total_S = p.between_S + p.within_S
  share_S = p.between_S / jnp.where(total_S > 0, total_S, 1.0)
  null_S = (p.subgroups_S - 1.0) / jnp.maximum(p.rows_S - 1.0, 1.0)
  return {
    "strategy/between_share": _pooled(share_S, p) / n_inf,
    "strategy/between_share_null": _pooled(null_S, p) / n_inf,
    "strategy/offset_reliability": _pooled(reliability(p, "batch"), p) / n_inf,
  }


def shrink(offset_N, p: Partition, group_ids_N, valid_N, scope: str) -> jax.Array:
  """λ_g(i)·offset_i (statement 19): one factor per group keeps Σ_{i∈g} b_i = Σ_{i∈g} r_i for
  any zero-sum offsets. λ comes from the real partition whatever offsets it scales. Shapes: N."""
  return offset_N * seg.gather(reliability(p, scope), group_ids_N, valid_N)
