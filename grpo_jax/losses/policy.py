"""The policy loss: the kind's per-token loss + β·KL − c·entropy, aggregated (METHODS §4).

  L = agg(w·ℓ) + β·agg(KL) − c_H·agg(H),   e.g. ℓ = max(−A·ρ, −A·clip(ρ, 1 − ε_low, 1 + ε_high))

with ℓ, its ratio and default ε chosen by ``loss.kind`` (``grpo_jax.losses.kinds``: grpo, dapo,
gspo, cispo, sapo, gmpo), the selected tokens' ℓ changed by ``loss.entropy_control``
(``grpo_jax.losses.entropy_control``), the aggregation by ``loss.aggregation``, and w the
rollout correction's constant weight (1 without one; ``grpo_jax.losses.correction``).
``policy_loss`` is additive over rows: called on any partition of the step's rows with the same
step-global ``denominators`` (and the step's entropy-control selection), the pieces (and every
aux metric) sum to the full-batch value, and so do the gradients, which makes micro-batch
accumulation and data sharding exact.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from grpo_jax.losses import correction, entropy_control, kinds, ratios
from grpo_jax.losses.aggregation import AGGREGATIONS, token_mean
from grpo_jax.losses.kinds import LOSS_KINDS, LossKind, resolve_clip
from grpo_jax.losses.kl import KL_ESTIMATORS, kl_penalty
from grpo_jax.losses.registry import lookup


class Terms(NamedTuple):
  """The inputs of the loss's optional terms: ``ref_logps_NxT`` log π_ref (constant) for the KL
  term, ``entropy_NxT`` the per-token policy entropy H_t (differentiated) for the entropy term,
  ``sample_logps_NxT`` the sampler's log-probs for the rollout correction
  (``loss.rollout_correction``), ``control_NxT`` the tokens ``loss.entropy_control`` acts on
  (``entropy_control.select`` on the whole step's rows, sliced like them); None leaves the term
  out (its coefficient must then be 0, the correction and the control ``none``)."""

  ref_logps_NxT: jax.Array | None = None
  entropy_NxT: jax.Array | None = None
  sample_logps_NxT: jax.Array | None = None
  control_NxT: jax.Array | None = None


def _check(cfg_loss, ref_logps_NxT, entropy_NxT, control_NxT) -> None:
  # The values themselves are checked at load (the ``loss`` group); these rules need the inputs.
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
  if entropy_control.applies(cfg_loss) and control_NxT is None:
    raise ValueError(
      f"loss.entropy_control = {cfg_loss.entropy_control!r} needs Terms.control_NxT, the "
      "tokens entropy_control.select picks over the whole step's rows"
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
    terms: the optional terms' inputs (:class:`Terms`); None = no such term (its coefficient,
      loss.kl_coef or loss.entropy_coef, must then be 0, loss.entropy_control ``none``).

  Returns:
    (loss, aux). loss = loss/policy + kl_coef·loss/kl − entropy_coef·loss/entropy. aux (all
    scalars, all additive over micro-batches, metrics under stop-gradient):
      loss/total       the returned loss;
      loss/policy      agg(ℓ) with the configured aggregation (after the entropy control);
      loss/kl          agg(KL_t) (unweighted; only with ref_logps_NxT);
      loss/entropy     agg(H_t) (unweighted; 0 without entropy_NxT);
      clip/low_frac    fraction of valid tokens with ρ < 1 − ε_low and A < 0 (cispo: any A;
                       gmpo: log ρ < −ε_low; not with sapo, whose gate has no clip);
      clip/high_frac   fraction of valid tokens with ρ > 1 + ε_high and A > 0 (likewise);
      clip/dual_frac   fraction of valid tokens capped by the dual clip (A < 0; with one);
      entropy/controlled_frac  fraction of valid tokens the entropy control changed (with one);
      ppo_kl           token mean of logπ_old − logπ (clamped token log-ratio; k1 of old‖θ);
      ratio/mean       token mean of ρ (gspo: of s_i, gmpo: of R_i, per token).
    Fractions and means divide by the step's valid-token count (token_mean), whatever the
    loss aggregation, so they stay fractions.
  """
  agg = lookup(AGGREGATIONS, cfg_loss.aggregation, "loss.aggregation")
  lookup(KL_ESTIMATORS, cfg_loss.kl_estimator, "loss.kl_estimator")  # fail early on a typo
  ref_logps_NxT, entropy_NxT, sample_logps_NxT, control_NxT = terms or Terms()
  _check(cfg_loss, ref_logps_NxT, entropy_NxT, control_NxT)
  if correction.applies(cfg_loss) and sample_logps_NxT is None:
    raise ValueError(
      f"loss.rollout_correction = {cfg_loss.rollout_correction!r} needs the sampler's "
      "log-probs (Terms.sample_logps_NxT)"
    )
  kl_coef, entropy_coef = cfg_loss.kl_coef, cfg_loss.entropy_coef
  log_clamp = cfg_loss.ratio_log_clamp

  valid_NxT = jnp.asarray(mask_NxT) > 0
  logps_NxT, old_logps_NxT, adv_NxT = kinds.masked_inputs(
    logps_NxT, old_logps_NxT, advantages_N, valid_NxT
  )
  dtype = logps_NxT.dtype
  log_ratio_NxT = ratios.token_log_ratio(logps_NxT, old_logps_NxT, valid_NxT, log_clamp)

  loss_NxT, ratio_NxT, flags = kinds.token_loss(
    logps_NxT, old_logps_NxT, adv_NxT, valid_NxT, cfg_loss
  )
  controlled_NxT = jnp.zeros(valid_NxT.shape, bool)
  if entropy_control.applies(cfg_loss):
    controlled_NxT = jnp.asarray(control_NxT, bool) & valid_NxT
    loss_NxT = entropy_control.apply(loss_NxT, controlled_NxT, log_ratio_NxT, cfg_loss)
  if sample_logps_NxT is not None:  # rollout correction (grpo_jax.losses.correction)
    sample_logps_NxT = jnp.asarray(sample_logps_NxT, dtype)
    weight_NxT = correction.weights_NxT(old_logps_NxT, sample_logps_NxT, valid_NxT, cfg_loss)
    if weight_NxT is not None:
      loss_NxT = loss_NxT * weight_NxT
  policy = agg(loss_NxT, valid_NxT, denoms)
  total = policy

  kl = entropy = jnp.zeros((), dtype)
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
  frac = lambda x_NxT: token_mean(x_NxT.astype(dtype), valid_NxT, denoms)
  aux = {
    "loss/total": sg(total),
    "loss/policy": sg(policy),
    "loss/entropy": sg(entropy),
    "ppo_kl": sg(token_mean(-log_ratio_NxT, valid_NxT, denoms)),
    "ratio/mean": sg(token_mean(ratio_NxT, valid_NxT, denoms)),
  }
  if ref_logps_NxT is not None:
    aux["loss/kl"] = sg(kl)
  clips = () if cfg_loss.kind == "sapo" else ("low", "high")  # sapo: its gate bounds the update
  clips += ("dual",) * (cfg_loss.dual_clip != 0)
  aux.update({f"clip/{k}_frac": frac(flags[k]) for k in clips})
  if entropy_control.applies(cfg_loss):
    aux["entropy/controlled_frac"] = frac(controlled_NxT)
  return total, aux


__all__ = ["LOSS_KINDS", "LossKind", "Terms", "policy_loss", "resolve_clip"]
