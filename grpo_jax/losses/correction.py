"""Rollout correction with verl's semantics (METHODS §8; verl
``verl/trainer/ppo/rollout_corr_helper.py`` and the presets of its ``RolloutCorrectionConfig``,
``verl/trainer/config/algorithm.py``, documented on verl's page ``rollout_corr.md``).

The sampler's log-probs differ from the trainer's (a bf16 sampler, another engine, parameters
one update stale), so the batch is off-policy by the per-token ratio

  log ρ_t = log π_old(y_t) − log π_rollout(y_t),   clamped to [−20, 20] (verl's safety bound)

with π_old the trainer's own log-probs before the update and π_rollout the sampler's, of the
distribution the token was drawn from. Two mechanisms, both stop-gradient:

  IS weights   token      w_t = min(ρ_t, c)
               sequence   w_t = min(exp(Σ_t log ρ_t), c), the row's product broadcast
  rejection    sequence   a row whose exp(Σ_t log ρ_t) lies outside [lower, upper] leaves
               geometric  the same with exp(mean_t log ρ_t)
               veto       a row holding any ρ_t < veto leaves

c = ``loss.rollout_is_cap``; upper = ``loss.rollout_rs_high``, lower = ``loss.rollout_rs_low``
(1/upper when unset), veto = ``loss.rollout_veto``, each -1 for the preset's value. Rejected
rows leave the loss mask, and so every denominator of the step (``losses.denominators``): the
update applies :func:`reject` before it counts them. ``loss.rollout_correction`` names a preset:

  auto        token_tis with an external engine or rollout.off_policy_steps > 0, else none
              (set when the config loads)
  none        the surrogate as it is
  token_tis   token IS, c = 2                        (verl decoupled_token_is)
  seq_tis     sequence IS, c = 2                     (verl decoupled_seq_is)
  seq_mis     sequence IS, c = 2 + sequence          (verl decoupled_seq_is_rs)
              rejection outside [0.5, 2]
  geo_mis     geometric rejection outside            (verl decoupled_geo_rs)
              [1/1.001, 1.001] + veto 1e-4, no IS weights

A geometric mean needs tight bounds: 100 tokens at ρ = 1.01 have a product of 2.7 and a
geometric mean of 1.01.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from grpo_jax.losses.registry import lookup

LOG_CLAMP = 20.0  # verl's SAFETY_BOUND: exp(±20) bounds every weight


class Preset(NamedTuple):
  """What a ``loss.rollout_correction`` name does: ``weight`` token | sequence | None (no IS
  weights), ``reject`` sequence | geometric | None, and its default upper rejection bound and
  veto (0 = no veto)."""

  weight: str | None = None
  reject: str | None = None
  high: float = 0.0
  veto: float = 0.0


PRESETS = {
  "none": Preset(),
  "token_tis": Preset(weight="token"),
  "seq_tis": Preset(weight="sequence"),
  "seq_mis": Preset(weight="sequence", reject="sequence", high=2.0),
  "geo_mis": Preset(reject="geometric", high=1.001, veto=1e-4),
}
CORRECTIONS = ("auto", *PRESETS)


def preset(cfg_loss) -> Preset:
  """The preset of ``loss.rollout_correction`` (``auto`` unresolved reads as ``none``: it is
  resolved when a config loads, ``config.base.resolve_defaults``)."""
  name = cfg_loss.rollout_correction
  return PRESETS["none"] if name == "auto" else lookup(PRESETS, name, "loss.rollout_correction")


def bounds(cfg_loss) -> tuple[float, float, float]:
  """(lower, upper, veto) of the rejection: the keys, or the preset's where they are -1."""
  p = preset(cfg_loss)
  high = cfg_loss.rollout_rs_high if cfg_loss.rollout_rs_high > 0 else p.high
  low = cfg_loss.rollout_rs_low if cfg_loss.rollout_rs_low > 0 else (1.0 / high if high else 0.0)
  veto = cfg_loss.rollout_veto if cfg_loss.rollout_veto >= 0 else p.veto
  return low, high, veto


def applies(cfg_loss) -> bool:
  """Whether the loss needs the sampler's log-probs (IS weights or a rejection)."""
  p = preset(cfg_loss)
  return p.weight is not None or rejects(cfg_loss)


def rejects(cfg_loss) -> bool:
  """Whether rows can leave the mask (a rejection level or a veto): the update then needs π_old
  before it counts the step's denominators."""
  return preset(cfg_loss).reject is not None or bounds(cfg_loss)[2] > 0


def log_ratio(old_logps_NxT, sample_logps_NxT, valid_NxT) -> jax.Array:
  """log ρ_t = log π_old − log π_rollout on valid tokens (0 elsewhere), clamped, constant."""
  log_w = jnp.where(valid_NxT, old_logps_NxT - sample_logps_NxT, 0.0)
  return jax.lax.stop_gradient(jnp.clip(log_w, -LOG_CLAMP, LOG_CLAMP))


def row_log_ratio_N(log_w_NxT, valid_NxT, level: str) -> jax.Array:
  """A row's log ratio: Σ_t (``sequence``) or mean_t (``geometric``) of log ρ_t, clamped."""
  total_N = jnp.sum(log_w_NxT, axis=1)
  if level == "geometric":
    total_N = total_N / jnp.maximum(jnp.sum(valid_NxT, axis=1), 1)
  return jnp.clip(total_N, -LOG_CLAMP, LOG_CLAMP)


def weights_NxT(old_logps_NxT, sample_logps_NxT, valid_NxT, cfg_loss) -> jax.Array | None:
  """The IS weight of each token under the preset (None without IS weights), a constant."""
  level = preset(cfg_loss).weight
  if level is None:
    return None
  log_w = log_ratio(old_logps_NxT, sample_logps_NxT, valid_NxT)
  if level == "sequence":
    log_w = jnp.broadcast_to(row_log_ratio_N(log_w, valid_NxT, level)[:, None], log_w.shape)
  return jnp.minimum(jnp.exp(log_w), cfg_loss.rollout_is_cap)


class Rejection(NamedTuple):
  """:func:`reject`'s result: the mask without the rejected rows, and which rows left it
  (``rejected_N`` by the bounds or the veto, ``vetoed_N`` by the veto)."""

  mask_NxT: jax.Array
  rejected_N: jax.Array
  vetoed_N: jax.Array


def reject(old_logps_NxT, sample_logps_NxT, mask_NxT, cfg_loss) -> Rejection:
  """The rows the preset rejects, taken out of ``mask_NxT`` (rows without a valid token are
  never counted as rejected)."""
  valid_NxT = jnp.asarray(mask_NxT) > 0
  scored_N = jnp.any(valid_NxT, axis=1)
  log_w = log_ratio(old_logps_NxT, sample_logps_NxT, valid_NxT)
  low, high, veto = bounds(cfg_loss)
  level = preset(cfg_loss).reject
  out_N = jnp.zeros(scored_N.shape, bool)
  if level is not None:
    row_N = jnp.exp(row_log_ratio_N(log_w, valid_NxT, level))
    out_N = (row_N < low) | (row_N > high)
  vetoed_N = jnp.zeros(scored_N.shape, bool)
  if veto > 0:
    vetoed_N = jnp.any(valid_NxT & (log_w < jnp.log(veto)), axis=1)
  rejected_N = (out_N | vetoed_N) & scored_N
  mask_NxT = jnp.where(rejected_N[:, None], jnp.zeros_like(mask_NxT), mask_NxT)
  return Rejection(mask_NxT, rejected_N, vetoed_N & scored_N)


def mismatch_metrics(
  logps_NxT,
  sample_logps_NxT,
  mask_NxT,
  valid_N,
  rejection: Rejection | None = None,
  veto: bool = False,
) -> dict:
  """Sampler-trainer mismatch over a whole batch's scored tokens (``mask_NxT`` before any
  rejection):

  mismatch/kl              token mean of k3 = (ρ − 1) − log ρ: KL(π_rollout ‖ π_old) from the
                           sampler's tokens (verl's k3_kl), ≥ 0, 0 exactly when the two agree
  mismatch/is_weight_mean  token mean of ρ (untruncated)
  mismatch/is_weight_max   its max over scored tokens
  mismatch/masked_frac     the share of valid rows rejected (bounds or veto), with a ``rejection``
  mismatch/veto_frac       the share of valid rows the veto rejected, with ``veto`` (one is set)
  """
  valid_NxT = mask_NxT > 0
  log_w = log_ratio(logps_NxT, sample_logps_NxT, valid_NxT)
  w = jnp.exp(log_w)
  tokens = jnp.maximum(jnp.sum(valid_NxT), 1)
  mean = lambda x: jnp.sum(jnp.where(valid_NxT, x, 0.0)) / tokens
  rows = jnp.maximum(jnp.sum(valid_N), 1)
  share = lambda r_N: jnp.sum(valid_N & r_N) / rows
  out = {
    "mismatch/kl": mean((w - 1.0) - log_w),
    "mismatch/is_weight_mean": mean(w),
    "mismatch/is_weight_max": jnp.max(jnp.where(valid_NxT, w, 0.0)),
  }
  if rejection is not None:
    out["mismatch/masked_frac"] = share(rejection.rejected_N)
  if rejection is not None and veto:
    out["mismatch/veto_frac"] = share(rejection.vetoed_N)
  return out


__all__ = [
  "CORRECTIONS",
  "LOG_CLAMP",
  "PRESETS",
  "Preset",
  "Rejection",
  "applies",
  "bounds",
  "log_ratio",
  "mismatch_metrics",
  "preset",
  "reject",
  "rejects",
  "weights_NxT",
]
