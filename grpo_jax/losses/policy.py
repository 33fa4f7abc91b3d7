"""The policy loss: clipped surrogate + β·KL − c·entropy, aggregated (METHODS §4).

  L = agg(w·ℓ) + β·agg(KL) − c_H·agg(H),   ℓ = max(−A·ρ, −A·clip(ρ, 1 − ε_low, 1 + ε_high))

with the ratio ρ, the default ε and the aggregation chosen by name from the ``loss`` config
group, and w the rollout correction's constant weight (1 without one;
``grpo_jax.losses.correction``). ``policy_loss`` is additive over rows: called on any partition
of the step's rows with the same step-global ``denominators``, the pieces (and every aux
metric) sum to the full-batch value, and so do the gradients, which makes micro-batch
accumulation and data sharding exact.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from grpo_jax.losses import correction, ratios
from grpo_jax.losses.aggregation import AGGREGATIONS, token_mean
from grpo_jax.losses.kl import KL_ESTIMATORS, kl_penalty
from grpo_jax.losses.registry import lookup
from grpo_jax.losses.surrogate import clipped_surrogate


class Terms(NamedTuple):
  """The inputs of the loss's optional terms: ``ref_logps_NxT`` log π_ref (constant) for the KL
  term, ``entropy_NxT`` the per-token policy entropy H_t (differentiated) for the entropy term,
  ``sample_logps_NxT`` the sampler's log-probs for the rollout correction
  (``loss.rollout_correction``); None leaves the term out (its coefficient must then be 0,
  the correction ``none``)."""

  ref_logps_NxT: jax.Array | None = None
  entropy_NxT: jax.Array | None = None
  sample_logps_NxT: jax.Array | None = None


@dataclasses.dataclass(frozen=True)
class LossKind:
  """A policy-loss variant: which importance ratio it uses and its default clip range."""

  ratio: Callable  # (logps_NxT, old_logps_NxT, valid_NxT, log_clamp) -> ratio_NxT
  eps_low: float
  eps_high: float


# ``loss.kind`` by name. DAPO's recipe also uses token_mean aggregation (the config default);
# GSPO's paper averages per sequence (seq_mean_token_mean). Aggregation is never forced by the
# kind: it is whatever ``loss.aggregation`` says.
LOSS_KINDS = {
  "grpo": LossKind(ratios.token_ratio, 0.2, 0.2),  # Shao et al. 2024
  "dapo": LossKind(ratios.token_ratio, 0.2, 0.28),  # Yu et al. 2025, clip-higher
  "gspo": LossKind(ratios.sequence_ratio, 3e-4, 4e-4),  # Zheng et al. 2025
}


def resolve_clip(cfg_loss) -> tuple[float, float]:
  """(ε_low, ε_high): ``loss.clip_low`` / ``clip_high``, a negative value meaning the kind's."""
  kind = lookup(LOSS_KINDS, cfg_loss.kind, "loss.kind")
  eps_low = cfg_loss.clip_low if cfg_loss.clip_low >= 0 else kind.eps_low
  eps_high = cfg_loss.clip_high if cfg_loss.clip_high >= 0 else kind.eps_high
  if not 0.0 <= eps_low < 1.0:
    raise ValueError(f"loss.clip_low must be in [0, 1) (or -1 = default), got {eps_low}")
  return eps_low, eps_high


def _check(cfg_loss, ref_logps_NxT, entropy_NxT) -> None:
  # The values themselves are checked by the ``loss`` view; these rules need the inputs.
  if ref_logps_NxT is None and cfg_loss.kl_coef != 0.0:
    raise ValueError(
      f"loss.kl_coef = {cfg_loss.kl_coef} needs ref_logps_NxT (the reference model's "
      "log-probs); pass them or set loss.kl_coef = 0"
    )
  if entropy_NxT is None and cfg_loss.entropy_coef != 0.0:
    raise ValueError(
      f"loss.entropy_coef = {cfg_loss.entropy_coef} needs entropy_NxT; pass it or set "
      "loss.entropy_coef = 0"
    )


def policy_loss(
  logps_NxT,
  old_logps_NxT,
  advantages_N,
  mask_NxT,
  cfg_loss,
  denoms,
  terms: Terms | None = None,
):
  """Scalar loss of these rows and a flat dict of additive scalar metrics.

  Args:
    logps_NxT: log π_θ of the sampled tokens (differentiated).
    old_logps_NxT: log π_old of the same tokens (behaviour policy; constant).
    advantages_N: per-row advantage A_i (constant; broadcast over the row's tokens).
    mask_NxT: 1/True on tokens that enter the loss (METHODS §4 statement 14); anything at masked
      positions of the other inputs (padding, -inf, NaN) is ignored, in values and gradients.
    cfg_loss: the experiment's validated ``loss`` group (typed and in range), read at trace
      time.
    denoms: ``denominators(mask of the WHOLE step, cfg_loss)``, the same for every micro-batch.
    terms: the KL and entropy terms' inputs (:class:`Terms`); None = no such term (its
      coefficient, loss.kl_coef or loss.entropy_coef, must then be 0).

  Returns:
    (loss, aux). loss = loss/policy + kl_coef·loss/kl − entropy_coef·loss/entropy. aux (all
    scalars, all additive over micro-batches, metrics under stop-gradient):
      loss/total       the returned loss;
      loss/policy      agg(ℓ) with the configured aggregation;
      loss/kl          agg(KL_t) (unweighted; 0 without ref_logps_NxT);
      loss/entropy     agg(H_t) (unweighted; 0 without entropy_NxT);
      clip/low_frac    fraction of valid tokens with ρ < 1 − ε_low and A < 0;
      clip/high_frac   fraction of valid tokens with ρ > 1 + ε_high and A > 0;
      clip/dual_frac   fraction of valid tokens capped by the dual clip (A < 0);
      ppo_kl           token mean of logπ_old − logπ (clamped token log-ratio; k1 of old‖θ);
      ratio/mean       token mean of ρ (for gspo: of s_i, per token).
    Fractions and means divide by the step's valid-token count (token_mean), whatever the
    loss aggregation, so they stay fractions.
  """
  kind = lookup(LOSS_KINDS, cfg_loss.kind, "loss.kind")
  agg = lookup(AGGREGATIONS, cfg_loss.aggregation, "loss.aggregation")
  lookup(KL_ESTIMATORS, cfg_loss.kl_estimator, "loss.kl_estimator")  # fail early on a typo
  eps_low, eps_high = resolve_clip(cfg_loss)
  ref_logps_NxT, entropy_NxT, sample_logps_NxT = terms or Terms()
  _check(cfg_loss, ref_logps_NxT, entropy_NxT)
  if correction.applies(cfg_loss) and sample_logps_NxT is None:
    raise ValueError(
      f"loss.rollout_correction = {cfg_loss.rollout_correction!r} needs the sampler's "
      "log-probs (Terms.sample_logps_NxT)"
    )
  kl_coef, entropy_coef = cfg_loss.kl_coef, cfg_loss.entropy_coef
  log_clamp = cfg_loss.ratio_log_clamp

  valid_NxT = jnp.asarray(mask_NxT) > 0
  dtype = jnp.result_type(logps_NxT, jnp.float32)  # at least fp32 (bf16 log-probs upcast)
  logps_NxT = jnp.where(valid_NxT, logps_NxT, 0.0).astype(dtype)
  old_logps_NxT = jax.lax.stop_gradient(jnp.where(valid_NxT, old_logps_NxT, 0.0).astype(dtype))
  # A = 0 on masked tokens: their ℓ and ∂ℓ are exactly 0 even if a padded row's A is NaN.
  adv_NxT = jnp.asarray(advantages_N, dtype)[:, None]
  adv_NxT = jax.lax.stop_gradient(jnp.where(valid_NxT, adv_NxT, 0.0))

  ratio_NxT = kind.ratio(logps_NxT, old_logps_NxT, valid_NxT, log_clamp)
  loss_NxT, flags = clipped_surrogate(ratio_NxT, adv_NxT, eps_low, eps_high, cfg_loss.dual_clip)
  if sample_logps_NxT is not None:  # rollout correction (grpo_jax.losses.correction)
    sample_logps_NxT = jnp.asarray(sample_logps_NxT, dtype)
    weight_NxT = correction.weights_NxT(old_logps_NxT, sample_logps_NxT, valid_NxT, cfg_loss)
    if weight_NxT is not None:
      loss_NxT = loss_NxT * weight_NxT
  policy = agg(loss_NxT, valid_NxT, denoms)
  total = policy

  zero = jnp.zeros((), dtype)
  kl = entropy = zero
  if ref_logps_NxT is not None:
    ref_logps_NxT = jnp.where(valid_NxT, ref_logps_NxT, 0.0).astype(dtype)
    kl = agg(kl_penalty(logps_NxT, ref_logps_NxT, cfg_loss.kl_estimator), valid_NxT, denoms)
    if kl_coef != 0.0:
      total = total + kl_coef * kl
  if entropy_NxT is not None:
    entropy_NxT = jnp.where(valid_NxT, entropy_NxT, 0.0).astype(dtype)
    entropy = agg(entropy_NxT, valid_NxT, denoms)
    if entropy_coef != 0.0:
      total = total - entropy_coef * entropy

  sg = jax.lax.stop_gradient
  log_ratio_NxT = ratios.token_log_ratio(logps_NxT, old_logps_NxT, valid_NxT, log_clamp)
  aux = {
    "loss/total": sg(total),
    "loss/policy": sg(policy),
    "loss/kl": sg(kl),
    "loss/entropy": sg(entropy),
    "clip/low_frac": token_mean(flags["low"].astype(dtype), valid_NxT, denoms),
    "clip/high_frac": token_mean(flags["high"].astype(dtype), valid_NxT, denoms),
    "clip/dual_frac": token_mean(flags["dual"].astype(dtype), valid_NxT, denoms),
    "ppo_kl": sg(token_mean(-log_ratio_NxT, valid_NxT, denoms)),
    "ratio/mean": sg(token_mean(ratio_NxT, valid_NxT, denoms)),
  }
  return total, aux
