"""The offset controls of the subgroup-offset baseline (``advantage.offset_control``; METHODS §1).

Each control turns the real per-subgroup offsets δ_s into the row offsets the baseline
b_i = μ_g + α·δ_{s(i)} uses, looked up by name in :data:`OFFSET_CONTROLS`:

  none                 δ_s itself (the method);
  shuffle              δ_{π(s)}, π a permutation within the prompt or the batch
                       (``offset_shuffle_scope``), optionally re-centred (``shuffle.py``);
  noise                zero-sum Gaussian noise of each prompt's row-weighted RMS (``noise.py``);
  magnitude_scramble   sgn(δ_s)·|δ_π(s)| within the prompt, optionally rebalanced to the real
                       mass of each sign (``magnitude_scramble.py``).

Every control has the signature ``(stats, subgroup_ids_N, group_ids_N, valid_N, adv_cfg, rng)
-> offset_N``; ``stats`` is :func:`grpo_jax.advantages.offsets.group_stats`'s. Shapes: N rows.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from grpo_jax.advantages import segments as seg
from grpo_jax.advantages.magnitude_scramble import magnitude_scramble
from grpo_jax.advantages.noise import matched_noise
from grpo_jax.advantages.shuffle import offset_permutation, recentring_mean


def real(stats, subgroup_ids_N, group_ids_N, valid_N, adv_cfg, rng) -> jax.Array:
  """δ_{s(i)}: each row's own subgroup offset."""
  del group_ids_N, adv_cfg, rng
  return seg.gather(stats.offset_S, subgroup_ids_N, valid_N)


def shuffled(stats, subgroup_ids_N, group_ids_N, valid_N, adv_cfg, rng) -> jax.Array:
  """δ_{π(s(i))}, minus the prompt's row mean of the shuffled offsets with
  ``offset_shuffle_recenter``."""
  scope = adv_cfg.offset_shuffle_scope
  src_S = offset_permutation(rng, stats.subgroup_group_S, stats.subgroup_valid_S, scope)
  offset_N = seg.gather(stats.offset_S[src_S], subgroup_ids_N, valid_N)
  if not adv_cfg.offset_shuffle_recenter:
    return offset_N
  mean_G = recentring_mean(
    stats.offset_S,
    stats.subgroup_count_S,
    src_S,
    stats.subgroup_group_S,
    stats.subgroup_valid_S,
    scope,
  )
  return jnp.where(valid_N, offset_N - seg.gather(mean_G, group_ids_N, valid_N), 0.0)


def noise(stats, subgroup_ids_N, group_ids_N, valid_N, adv_cfg, rng) -> jax.Array:
  """ε_{s(i)}: zero-sum noise of the real offsets' per-prompt magnitude."""
  del group_ids_N, adv_cfg
  noise_S = matched_noise(
    rng, stats.offset_S, stats.subgroup_count_S, stats.subgroup_group_S, stats.subgroup_valid_S
  )
  return seg.gather(noise_S, subgroup_ids_N, valid_N)


def scrambled(stats, subgroup_ids_N, group_ids_N, valid_N, adv_cfg, rng) -> jax.Array:
  """δ'_{s(i)} (δ'' with ``offset_magnitude_scramble_rebalance``): own sign, another
  subgroup's magnitude."""
  del group_ids_N
  scrambled_S = magnitude_scramble(
    rng,
    stats.offset_S,
    stats.subgroup_count_S,
    stats.subgroup_group_S,
    stats.subgroup_valid_S,
    adv_cfg.offset_magnitude_scramble_rebalance,
  )
  return seg.gather(scrambled_S, subgroup_ids_N, valid_N)


OFFSET_CONTROLS = {
  "none": real,
  "shuffle": shuffled,
  "noise": noise,
  "magnitude_scramble": scrambled,
}


def get_offset_control(name: str):
  """The control registered as ``name``; an unknown one is a ValueError naming the valid ones."""
  if name not in OFFSET_CONTROLS:
    raise ValueError(
      f"advantage.offset_control must be one of {sorted(OFFSET_CONTROLS)}, got {name!r}"
    )
  return OFFSET_CONTROLS[name]
