"""The public entry: rewards and ids in, advantages, new HA-DW anchor and metrics out.

  Ã_i = r_i − b_i                        (METHODS §1; baseline and offset control by name)
  A_i = Ã_i / (σ + ε)                    (§2; or Ã_i with scale='none')
  A_i ← Φ_i·A_i                          (§3; HA-DW, when hadw.enabled, after normalisation)
                                         (p̂_g and y_t from the raw accuracy, see ``compute``)
  b_i = μ_g + α·λ_g·δ_s(i)               (§7.19; advantage.offset_strength = 'shrunk')
  A_i = 0 for padded rows and for every row of a group whose rewards are all equal (§2.6).

Config values are read at trace time, so ``jax.jit(functools.partial(compute, cfg=cfg))``
(or a jitted train step closing over cfg) compiles one graph per experiment.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from grpo_jax.advantages import segments as seg
from grpo_jax.advantages.baselines import USES_OFFSETS, get_baseline
from grpo_jax.advantages.hadw import hadw_weights, update_anchor
from grpo_jax.advantages.normalize import normalize, zero_rounding
from grpo_jax.advantages.offset_controls import get_offset_control
from grpo_jax.advantages.offsets import group_stats, valid_rows
from grpo_jax.advantages.partition import (
  PARTITION_KEYS,
  STRENGTHS,
  diagnostics,
  partition_stats,
  shrink,
)

BASE_KEYS = ("adv/mean", "adv/abs_mean", "adv/zero_std_frac", "hadw/batch_acc")
HADW_KEYS = (
  "hadw/anchor",
  "hadw/eta",
  "hadw/phi_mean",
  "hadw/phi_min",
  "hadw/phi_max",
  "hadw/phi_boosted_mean",
  "hadw/phi_damped_mean",
)
SUBGROUP_KEYS = ("adv/subgroups_per_prompt", *PARTITION_KEYS)
AUX_KEYS = (*BASE_KEYS, *HADW_KEYS, "adv/offset_abs_mean", *SUBGROUP_KEYS)


def aux_keys(adv, hadw, subgroups: bool) -> tuple[str, ...]:
  """The metrics :func:`compute` returns: HA-DW's with ``hadw.enabled``, the offsets' size with
  an offset baseline, subgroups per prompt and the partition diagnostics (METHODS §7) when
  subgroup ids are given."""
  keys = BASE_KEYS + HADW_KEYS * hadw.enabled
  keys += ("adv/offset_abs_mean",) * (adv.baseline in USES_OFFSETS)
  return keys + SUBGROUP_KEYS * subgroups


class Rewards(NamedTuple):
  """Rewards with HA-DW's inputs from the verifier's raw accuracy, before any reward shaping
  (METHODS §3). ``shaped_N``: what the baseline and the normalisation read. ``accuracy_N``:
  accuracy per row, from which p̂_g is taken (DAPO's overlong penalty shapes the rewards, not
  this); default: ``shaped_N``. ``step``: y_t, when the rows are not every sampled response of
  the step (DAPO's dynamic sampling drops groups; y_t still averages all of them); default: the
  mean of ``accuracy_N`` over the valid rows."""

  shaped_N: jax.Array
  accuracy_N: jax.Array | None = None
  step: jax.Array | None = None


# Bound on the float32 rounding of Ã = r − μ_g − α·δ for rewards in [0, 1]: 16 ulps of 1.0 per
# unit of (1 + |α|), an order above what the few operations behind Ã can accumulate.
RAW_ROUNDING = 2.0**-20


def check_ids(group_ids_N, subgroup_ids_N) -> None:
  """Rejects concrete ids >= N (N = the number of rows; negative = padding is allowed).

  The segment reductions have N slots, so an id >= N would silently fall out of every
  statistic: its row gets A = 0 and leaves the batch accuracy. Traced ids (inside jit) cannot
  be checked; there the ids must be dense by contract (the rollouts number groups by prompt
  and subgroups by preview slot, both < N)."""
  for name, ids in (("group_ids_N", group_ids_N), ("subgroup_ids_N", subgroup_ids_N)):
    if ids is None or isinstance(ids, jax.core.Tracer):
      continue
    ids = np.asarray(ids)
    n = ids.shape[0]
    bad = ids >= n
    if bad.any():
      i = int(np.argmax(bad))
      raise ValueError(
        f"{name}[{i}] = {int(ids[i])} is outside [0, N = {n}): ids must be row-global and "
        "below the number of rows (negative = padding)"
      )


def row_offsets(stats, subgroup_ids_N, group_ids_N, valid_N, adv_cfg, rng) -> jax.Array:
  """δ_s(i) per row as ``advantage.offset_control`` makes it (:data:`OFFSET_CONTROLS`: the
  real offsets, shuffled, matched noise or the sign-keeping magnitude scramble). Shapes: N."""
  control = get_offset_control(adv_cfg.offset_control)
  return control(stats, subgroup_ids_N, group_ids_N, valid_N, adv_cfg, rng)


def compute(
  rewards: jax.Array | Rewards,
  group_ids_N: jax.Array,
  subgroup_ids_N: jax.Array | None,
  adv,
  hadw,
  anchor: dict[str, jax.Array],
  rng: jax.Array,
) -> tuple[jax.Array, dict[str, jax.Array], dict[str, jax.Array]]:
  """Advantages for one step (METHODS §1-3). Returns (advantages_N, new_anchor, aux).

  ``rewards``: rewards_N, float in [0, 1], or :class:`Rewards` with HA-DW's raw-accuracy inputs
  (p̂_g and y_t, while the baseline and the normalisation (§1-2) read the shaped rewards; by
  default both come from the rewards, the same when nothing shapes them). group_ids_N /
  subgroup_ids_N int ids in [0, N), global over the rows, negative = padded row
  (``subgroup_ids_N=None`` means one subgroup per group, and no ``adv/subgroups_per_prompt``).
  Concrete ids (host arrays) >= N are a ValueError (:func:`check_ids`); traced ids (under jit)
  are not checked and must be dense: an id >= N would give its row A = 0 and drop it from y_t.
  ``adv``, ``hadw``: the experiment's ``advantage`` and ``hadw`` groups (validated at load:
  the values are typed and in range, and only the names are looked up here). ``anchor`` is
  :func:`init_anchor`'s state (returned unchanged when HA-DW is off); ``rng`` a PRNG key (used
  by the offset controls other than 'none' only). ``aux`` holds the scalars of
  :func:`aux_keys`: those of the features in use, no constant by construction.
  """
  adv_cfg, hadw_cfg = adv, hadw
  check_ids(group_ids_N, subgroup_ids_N)
  rewards_N, accuracy_N, batch_acc = (
    rewards if isinstance(rewards, Rewards) else (rewards, None, None)
  )
  rewards_N = jnp.asarray(rewards_N, jnp.float32)
  group_ids_N = jnp.asarray(group_ids_N, jnp.int32)
  has_subgroups = subgroup_ids_N is not None
  subgroup_ids_N = jnp.asarray(subgroup_ids_N if has_subgroups else group_ids_N, jnp.int32)
  valid_N = valid_rows(group_ids_N, subgroup_ids_N)
  stats = group_stats(rewards_N, group_ids_N, subgroup_ids_N, valid_N)
  live_N = valid_N & ~stats.degenerate_N  # rows that can carry a non-zero advantage
  if adv_cfg.offset_strength not in STRENGTHS:
    raise ValueError(
      f"advantage.offset_strength must be one of {list(STRENGTHS)}, got {adv_cfg.offset_strength!r}"
    )
  shrunk = adv_cfg.offset_strength == "shrunk" and adv_cfg.baseline in USES_OFFSETS
  if has_subgroups or shrunk:  # §7: the partition's between/within sums
    part = partition_stats(rewards_N, group_ids_N, subgroup_ids_N, valid_N, stats)

  # §1: baseline and raw advantage (§7.19: offsets scaled by λ_g of the real partition, also
  # when a control replaced them).
  baseline_fn = get_baseline(adv_cfg.baseline)
  if adv_cfg.baseline in USES_OFFSETS:
    offset_N = row_offsets(stats, subgroup_ids_N, group_ids_N, valid_N, adv_cfg, rng)
    if shrunk:
      offset_N = shrink(offset_N, part, group_ids_N, valid_N, adv_cfg.offset_strength_scope)
  else:
    offset_N = jnp.zeros_like(rewards_N)
  raw_N = baseline_fn(rewards_N, stats, offset_N, adv_cfg.offset_coef)
  raw_N = jnp.where(live_N, raw_N, 0.0)

  # §2: normalisation; degenerate groups are forced to exact zeros under every setting.
  scale, scale_of, eps = adv_cfg.scale, adv_cfg.scale_of, adv_cfg.eps
  if scale_of == "advantages":
    raw_N = zero_rounding(raw_N, RAW_ROUNDING * (1.0 + abs(adv_cfg.offset_coef)))
  adv_N = normalize(raw_N, rewards_N, group_ids_N, valid_N, scale, scale_of, eps)
  adv_N = jnp.where(live_N, adv_N, 0.0)

  # §3: HA-DW, on the raw accuracy. y_t counts every valid row of the step, degenerate groups
  # included; p̂_g is the group mean of the accuracy (not of the shaped reward).
  if accuracy_N is None:
    accuracy_N, difficulty_N = rewards_N, stats.group_mean_N
  else:
    accuracy_N = jnp.asarray(accuracy_N, jnp.float32)
    difficulty_N = seg.gather(
      seg.exact_mean(accuracy_N, group_ids_N, valid_N), group_ids_N, valid_N
    )
  if batch_acc is None:
    batch_acc = seg.masked_mean(accuracy_N, valid_N)
  batch_acc = jnp.asarray(batch_acc, jnp.float32)
  new_anchor, hadw_aux = anchor, {}
  if hadw_cfg.enabled:
    anchor_value, new_anchor, eta = update_anchor(anchor, batch_acc, hadw_cfg)
    phi_N, direction_N = hadw_weights(adv_N, difficulty_N, anchor_value, hadw_cfg.lambda_scale)
    adv_N = jnp.where(valid_N, phi_N * adv_N, 0.0)
    any_valid = jnp.any(valid_N)
    hadw_aux = {
      "hadw/anchor": anchor_value,
      "hadw/eta": eta,
      "hadw/phi_mean": seg.masked_mean(phi_N, valid_N),
      "hadw/phi_min": jnp.where(any_valid, jnp.min(jnp.where(valid_N, phi_N, jnp.inf)), 0.0),
      "hadw/phi_max": jnp.where(any_valid, jnp.max(jnp.where(valid_N, phi_N, -jnp.inf)), 0.0),
      "hadw/phi_boosted_mean": seg.masked_mean(phi_N, valid_N & (direction_N > 0)),
      "hadw/phi_damped_mean": seg.masked_mean(phi_N, valid_N & (direction_N < 0)),
    }

  n_groups_safe = jnp.maximum(jnp.sum(stats.group_valid_S.astype(jnp.float32)), 1.0)
  aux = {
    "adv/mean": seg.masked_mean(adv_N, valid_N),
    "adv/abs_mean": seg.masked_mean(jnp.abs(adv_N), valid_N),
    "adv/zero_std_frac": jnp.sum(stats.group_degenerate_S.astype(jnp.float32)) / n_groups_safe,
    "hadw/batch_acc": batch_acc,
    **hadw_aux,
  }
  if adv_cfg.baseline in USES_OFFSETS:
    aux["adv/offset_abs_mean"] = seg.masked_mean(jnp.abs(stats.offset_S), stats.subgroup_valid_S)
  if has_subgroups:
    n_subgroups = jnp.sum(stats.subgroup_valid_S.astype(jnp.float32))
    aux["adv/subgroups_per_prompt"] = n_subgroups / n_groups_safe
    aux.update(diagnostics(part))
  aux = {k: jnp.asarray(v, jnp.float32) for k, v in aux.items()}
  return adv_N, new_anchor, aux
