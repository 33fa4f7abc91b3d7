"""The policy-loss kinds (``loss.kind``): each maps the step's log-probs to a per-token loss ℓ_t,
the ratio it reports and which tokens its clip acted on (METHODS §4; docs/losses.md).

  grpo, dapo, gspo   the PPO clipped surrogate of a token ratio ρ or GSPO's sequence ratio s_i
                     (``surrogate.py``, ``ratios.py``)
  cispo              −sg(clip(ρ, 1 − ε_low, 1 + ε_high))·A·logπ            (``cispo.py``)
  sapo               −A·sigmoid(τ(ρ − 1))·4/τ, τ by the sign of A           (``sapo.py``)
  gmpo               −A_i·exp(mean_t of the sign-aware clipped log-ratio)   (``gmpo.py``)

Every kind reads the same masked inputs (:func:`masked_inputs`: masked positions replaced with
0, old log-probs and advantages constant, at least float32), so its values and gradients are 0 on
masked tokens whatever the padding holds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from grpo_jax.losses import cispo, gmpo, ratios, sapo
from grpo_jax.losses.registry import lookup
from grpo_jax.losses.surrogate import clipped_surrogate


class TokenLoss(NamedTuple):
  """A kind's per-token result: ``loss_NxT`` ℓ_t; ``ratio_NxT`` the ratio ``ratio/mean`` reports
  (ρ, or a row's s_i / R_i on each of its tokens); ``flags`` boolean [N, T] maps ``low``,
  ``high``, ``dual`` of the tokens the clip acted on (``clip/*_frac``)."""

  loss_NxT: jax.Array
  ratio_NxT: jax.Array
  flags: dict


@dataclasses.dataclass(frozen=True)
class LossKind:
  """A policy-loss variant: its per-token loss
  ``token_loss(logps_NxT, old_logps_NxT, adv_NxT, valid_NxT, cfg_loss, eps_low, eps_high)``, its
  default clip range, and where ε applies: ``ratio`` (a bound 1 − ε_low ≥ 0 on a ratio, so
  ε_low ≤ 1), ``log`` (GMPO: bounds ±ε on log-ratios, any ε ≥ 0) or ``none`` (SAPO: no clip)."""

  token_loss: Callable
  eps_low: float
  eps_high: float
  clip: str = "ratio"
  surrogate: bool = False  # the PPO clipped surrogate (the dual clip applies)


def _ppo(ratio_fn):
  """The PPO clipped surrogate (with the dual clip) of ``ratio_fn``'s ratio."""

  def token_loss(logps_NxT, old_logps_NxT, adv_NxT, valid_NxT, cfg_loss, eps_low, eps_high):
    ratio_NxT = ratio_fn(logps_NxT, old_logps_NxT, valid_NxT, cfg_loss.ratio_log_clamp)
    loss_NxT, flags = clipped_surrogate(ratio_NxT, adv_NxT, eps_low, eps_high, cfg_loss.dual_clip)
    return TokenLoss(loss_NxT, ratio_NxT, flags)

  return token_loss


def _cispo(logps_NxT, old_logps_NxT, adv_NxT, valid_NxT, cfg_loss, eps_low, eps_high):
  ratio_NxT = ratios.token_ratio(logps_NxT, old_logps_NxT, valid_NxT, cfg_loss.ratio_log_clamp)
  loss_NxT, flags = cispo.token_loss(logps_NxT, ratio_NxT, adv_NxT, eps_low, eps_high)
  return TokenLoss(loss_NxT, ratio_NxT, flags)


def _sapo(logps_NxT, old_logps_NxT, adv_NxT, valid_NxT, cfg_loss, eps_low, eps_high):
  del eps_low, eps_high  # SAPO has no clip: its gate's temperatures bound the update
  ratio_NxT = ratios.token_ratio(logps_NxT, old_logps_NxT, valid_NxT, cfg_loss.ratio_log_clamp)
  tau = (cfg_loss.sapo_tau_pos, cfg_loss.sapo_tau_neg)
  loss_NxT = sapo.token_loss(ratio_NxT, adv_NxT, *tau)
  none_NxT = jnp.zeros(loss_NxT.shape, bool)
  return TokenLoss(loss_NxT, ratio_NxT, {"low": none_NxT, "high": none_NxT, "dual": none_NxT})


def _gmpo(logps_NxT, old_logps_NxT, adv_NxT, valid_NxT, cfg_loss, eps_low, eps_high):
  log_ratio_NxT = ratios.token_log_ratio(
    logps_NxT, old_logps_NxT, valid_NxT, cfg_loss.ratio_log_clamp
  )
  ratio_NxT, flags = gmpo.geometric_ratio(log_ratio_NxT, adv_NxT, valid_NxT, eps_low, eps_high)
  return TokenLoss(-adv_NxT * ratio_NxT, ratio_NxT, flags)


# ``loss.kind`` by name. DAPO's recipe also uses token_mean aggregation (the config default);
# GSPO's, SAPO's and GMPO's papers average per sequence (seq_mean_token_mean; verl forces it for
# SAPO and takes GMPO's mean over rows). Aggregation is never forced by the kind: it is whatever
# ``loss.aggregation`` says (``config.recipes`` sets each paper's).
LOSS_KINDS = {
  "grpo": LossKind(_ppo(ratios.token_ratio), 0.2, 0.2, surrogate=True),  # Shao et al. 2024
  "dapo": LossKind(_ppo(ratios.token_ratio), 0.2, 0.28, surrogate=True),  # Yu et al. 2025
  "gspo": LossKind(_ppo(ratios.sequence_ratio), 3e-4, 4e-4, surrogate=True),  # Zheng et al.
  # MiniMax-M1 (arXiv 2506.13585): no lower bound (ε_low = 1: the weight's floor is 0); the
  # weight capped at 5 (ε_high = 4), the ε_max = 5 TRL documents for ScaleRL (arXiv 2510.13786).
  "cispo": LossKind(_cispo, 1.0, 4.0),
  "sapo": LossKind(_sapo, 0.0, 0.0, clip="none"),  # SAPO, arXiv 2511.20347
  # GMPO (arXiv 2507.20673): log-ratios clipped to (−0.4, 0.4), i.e. ratios in (e^−0.4, e^0.4).
  "gmpo": LossKind(_gmpo, 0.4, 0.4, clip="log"),
}


def resolve_clip(cfg_loss) -> tuple[float, float]:
  """(ε_low, ε_high): ``loss.clip_low`` / ``clip_high``, a negative value meaning the kind's."""
  kind = lookup(LOSS_KINDS, cfg_loss.kind, "loss.kind")
  eps_low = cfg_loss.clip_low if cfg_loss.clip_low >= 0 else kind.eps_low
  eps_high = cfg_loss.clip_high if cfg_loss.clip_high >= 0 else kind.eps_high
  return eps_low, eps_high


def masked_inputs(logps_NxT, old_logps_NxT, advantages_N, valid_NxT):
  """(logπ, sg(logπ_old), sg(A) per token): masked positions 0, at least float32 (bf16
  log-probs upcast). A = 0 on masked tokens: their ℓ and ∂ℓ are exactly 0 even if a padded
  row's A is NaN."""
  dtype = jnp.result_type(logps_NxT, jnp.float32)
  logps_NxT = jnp.where(valid_NxT, logps_NxT, 0.0).astype(dtype)
  old_logps_NxT = jax.lax.stop_gradient(jnp.where(valid_NxT, old_logps_NxT, 0.0).astype(dtype))
  adv_NxT = jnp.asarray(advantages_N, dtype)[:, None]
  adv_NxT = jax.lax.stop_gradient(jnp.where(valid_NxT, adv_NxT, 0.0))
  return logps_NxT, old_logps_NxT, adv_NxT


def token_loss(logps_NxT, old_logps_NxT, adv_NxT, valid_NxT, cfg_loss) -> TokenLoss:
  """The kind ``loss.kind``'s per-token loss on masked inputs (:func:`masked_inputs`)."""
  kind = lookup(LOSS_KINDS, cfg_loss.kind, "loss.kind")
  eps_low, eps_high = resolve_clip(cfg_loss)
  return kind.token_loss(logps_NxT, old_logps_NxT, adv_NxT, valid_NxT, cfg_loss, eps_low, eps_high)


__all__ = ["LOSS_KINDS", "LossKind", "TokenLoss", "masked_inputs", "resolve_clip", "token_loss"]
