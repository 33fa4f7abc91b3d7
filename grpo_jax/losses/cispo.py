"""CISPO: the clipped importance weight as a constant coefficient of the log-prob (MiniMax-M1,
arXiv 2506.13585, eq. 4-5; verl ``compute_policy_loss_cispo`` in
``verl/trainer/ppo/core_algos.py``).

  ℓ_t = −sg(clip(ρ_t, 1 − ε_low, 1 + ε_high))·A·logπ_t,   ρ_t = exp(clamp(logπ − logπ_old, ±c))

Unlike the PPO surrogate, the clip never removes a token's gradient: ∂ℓ_t/∂logπ_t =
−clip(ρ_t)·A on every token (−A on-policy), the weight only bounded. The value is that of the
log-prob term, not of a ratio (−A·logπ on-policy). MiniMax-M1 sets no lower bound (ε_low large;
here 1, a floor of 0) and tunes only ε_high.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def token_loss(logps_NxT, ratio_NxT, adv_NxT, eps_low, eps_high):
  """(ℓ_NxT, flags): flags ``low`` / ``high`` mark the tokens whose weight the clip truncated
  (ρ < 1 − ε_low, ρ > 1 + ε_high, whatever the sign of A: verl's ``pg_clipfrac`` is their sum),
  ``dual`` none (no dual clip)."""
  weight_NxT = jax.lax.stop_gradient(jnp.clip(ratio_NxT, 1.0 - eps_low, 1.0 + eps_high))
  flags = {
    "low": ratio_NxT < 1.0 - eps_low,
    "high": ratio_NxT > 1.0 + eps_high,
    "dual": jnp.zeros(ratio_NxT.shape, bool),
  }
  return -weight_NxT * adv_NxT * logps_NxT, flags
