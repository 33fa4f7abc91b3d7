"""Group and subgroup statistics, and the subgroup offsets δ_s = μ_s − μ_g (METHODS §1).

One pass of segment reductions gives everything the baselines, the normalisers and HA-DW read:
per-row group mean/sum/count/std, whether the row's group is degenerate (all rewards equal),
and per-subgroup-slot offsets. Σ_{s∈g} n_s δ_s = 0 for every group (statement 4), which is
why any α keeps the advantages zero-sum per prompt.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from grpo_jax.advantages import segments as seg


class GroupStats(NamedTuple):
  """Per-row (``_N``) and per-slot (``_S``) statistics of one step's rewards."""

  group_mean_N: jax.Array  # μ_g(i)
  group_sum_N: jax.Array  # Σ_{j∈g(i)} r_j
  group_count_N: jax.Array  # G_g(i) (float)
  group_std_N: jax.Array  # std of r over g(i), ddof = 1
  degenerate_N: jax.Array  # all rewards of g(i) equal (incl. singleton groups)
  group_valid_S: jax.Array  # slot s is a non-empty group
  group_degenerate_S: jax.Array  # slot s is a non-empty degenerate group
  subgroup_valid_S: jax.Array  # slot s is a non-empty subgroup
  subgroup_count_S: jax.Array  # n_s (float; 0 for empty slots)
  subgroup_group_S: jax.Array  # id of the group holding subgroup s (−1 if empty)
  offset_S: jax.Array  # δ_s = μ_s − μ_g(s); 0 for empty slots


def valid_rows(group_ids_N: jax.Array, subgroup_ids_N: jax.Array) -> jax.Array:
  """A row takes part in the step iff both ids lie in [0, N); negative ids mark padding.

  Ids ≥ N break the contract (num_segments = N); such rows are treated as padding too, so
  they are dropped consistently from every statistic instead of half-counted.
  """
  n = group_ids_N.shape[0]
  in_range = lambda ids: (ids >= 0) & (ids < n)
  return in_range(group_ids_N) & in_range(subgroup_ids_N)


def group_stats(
  rewards_N: jax.Array, group_ids_N: jax.Array, subgroup_ids_N: jax.Array, valid_N: jax.Array
) -> GroupStats:
  """All segment statistics of a step. Shapes: N rows in, N rows / N slots out."""
  n = rewards_N.shape[0]
  gcount_S = seg.seg_count(group_ids_N, valid_N)
  gsum_S = seg.seg_sum(rewards_N, group_ids_N, valid_N)
  gmean_S = seg.exact_mean(rewards_N, group_ids_N, valid_N)
  gstd_S = seg.seg_std(rewards_N, group_ids_N, valid_N, ddof=1)
  # Degenerate = max == min: exact, unlike std == 0 after a float mean (0.3·3/3 ≠ 0.3).
  gmax_S = seg.seg_max(rewards_N, group_ids_N, valid_N)
  gmin_S = seg.seg_min(rewards_N, group_ids_N, valid_N)
  group_valid_S = gcount_S > 0
  group_degenerate_S = group_valid_S & (gmax_S == gmin_S)

  scount_S = seg.seg_count(subgroup_ids_N, valid_N)
  smean_S = seg.exact_mean(rewards_N, subgroup_ids_N, valid_N)
  subgroup_valid_S = scount_S > 0
  # Rows of one subgroup share one group (METHODS §1), so the max of their group ids is it.
  gid_for_max_N = jnp.where(valid_N, group_ids_N, -1).astype(jnp.int32)
  sub_group_S = jax.ops.segment_max(
    gid_for_max_N, jnp.where(valid_N, subgroup_ids_N, 0), num_segments=n
  )
  sub_group_S = jnp.where(subgroup_valid_S, sub_group_S, -1)
  offset_S = jnp.where(subgroup_valid_S, smean_S - gmean_S[jnp.maximum(sub_group_S, 0)], 0.0)

  g = lambda x_S, fill=0: seg.gather(x_S, group_ids_N, valid_N, fill)
  return GroupStats(
    group_mean_N=g(gmean_S),
    group_sum_N=g(gsum_S),
    group_count_N=g(gcount_S),
    group_std_N=g(gstd_S),
    degenerate_N=g(group_degenerate_S, True),
    group_valid_S=group_valid_S,
    group_degenerate_S=group_degenerate_S,
    subgroup_valid_S=subgroup_valid_S,
    subgroup_count_S=scount_S,
    subgroup_group_S=sub_group_S,
    offset_S=offset_S,
  )
