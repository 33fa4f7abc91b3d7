"""Advantages: baselines, subgroup offsets, normalisation and HA-DW (METHODS §1-3).

Pure jnp on rows: ``rewards_N`` with global integer ``group_ids_N`` / ``subgroup_ids_N``
(negative = padded row). Arrays indexed by id slot end in ``_S`` (N slots). Typical use::

  anchor = init_anchor(cfg.hadw)
  adv_N, anchor, aux = compute(rewards_N, group_ids_N, subgroup_ids_N, adv, hadw, anchor, rng)
"""

from grpo_jax.advantages.baselines import BASELINES, get_baseline
from grpo_jax.advantages.compute import AUX_KEYS, Rewards, aux_keys, compute, row_offsets
from grpo_jax.advantages.hadw import (
  ANCHOR_KEYS,
  ANCHORS,
  SIGMA_OF,
  hadw_weights,
  init_anchor,
  update_anchor,
)
from grpo_jax.advantages.magnitude_scramble import magnitude_scramble
from grpo_jax.advantages.noise import matched_noise
from grpo_jax.advantages.normalize import SCALE_OF, SCALES, normalize
from grpo_jax.advantages.offset_controls import OFFSET_CONTROLS, get_offset_control
from grpo_jax.advantages.offsets import GroupStats, group_stats, valid_rows
from grpo_jax.advantages.partition import (
  PARTITION_KEYS,
  STRENGTH_SCOPES,
  STRENGTHS,
  Partition,
  diagnostics,
  partition_stats,
  reliability,
  shrink,
)
from grpo_jax.advantages.shuffle import SCOPES, offset_permutation, recentring_mean

__all__ = [
  "ANCHORS",
  "ANCHOR_KEYS",
  "AUX_KEYS",
  "Rewards",
  "aux_keys",
  "BASELINES",
  "OFFSET_CONTROLS",
  "PARTITION_KEYS",
  "Partition",
  "STRENGTHS",
  "STRENGTH_SCOPES",
  "SCALES",
  "SCALE_OF",
  "SCOPES",
  "SIGMA_OF",
  "GroupStats",
  "compute",
  "diagnostics",
  "get_baseline",
  "get_offset_control",
  "group_stats",
  "hadw_weights",
  "init_anchor",
  "magnitude_scramble",
  "matched_noise",
  "normalize",
  "offset_permutation",
  "partition_stats",
  "recentring_mean",
  "reliability",
  "row_offsets",
  "shrink",
  "update_anchor",
  "valid_rows",
]
