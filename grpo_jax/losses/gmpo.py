"""GMPO: the geometric mean of the token ratios, clipped token by token ("Geometric-Mean Policy
Optimization", arXiv 2507.20673; verl ``compute_policy_loss_geo_mean`` in
``verl/trainer/ppo/core_algos.py``).

  d_t = clamp(logπ − logπ_old, ±c)                          (the token log-ratio)
  d̃_t = sgn(A)·min(sgn(A)·d_t, sgn(A)·clip(d_t, −ε_low, ε_high))
  R_i = exp(Σ_t m·d̃_t / n_i),   ℓ_i = −A_i·R_i

The sign makes the clip pessimistic as PPO's is: for A > 0 only d_t > ε_high is cut (its
gradient 0), for A < 0 only d_t < −ε_low. In the token form used here (as GSPO's,
``ratios.sequence_ratio``) every token of row i carries the value R_i and the gradient
∂R_i/∂logπ_{i,t}·n_i = R_i·∂d̃_t/∂d_t, so ``seq_mean_token_mean`` gives the sequence mean of
ℓ_i and its gradient exactly.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def geometric_ratio(log_ratio_NxT, adv_NxT, valid_NxT, eps_low, eps_high):
  """(R_NxT, flags): R_i on each token of row i, differentiable as above; flags ``high``
  (A > 0, d_t > ε_high) and ``low`` (A < 0, d_t < −ε_low) mark the tokens whose gradient the
  clip removes, ``dual`` none. [N, T]."""
  sgn_NxT = jnp.sign(adv_NxT)
  clipped_NxT = jnp.clip(log_ratio_NxT, -eps_low, eps_high)
  min_NxT = sgn_NxT * jnp.minimum(sgn_NxT * log_ratio_NxT, sgn_NxT * clipped_NxT)
  min_NxT = jnp.where(valid_NxT, min_NxT, 0.0)
  n_N = jnp.maximum(jnp.sum(valid_NxT, axis=1), 1).astype(min_NxT.dtype)
  log_r_N = jax.lax.stop_gradient(jnp.sum(min_NxT, axis=1) / n_N)
  ratio_NxT = jnp.exp(log_r_N[:, None] + min_NxT - jax.lax.stop_gradient(min_NxT))
  flags = {
    "low": (adv_NxT < 0) & (log_ratio_NxT < -eps_low),
    "high": (adv_NxT > 0) & (log_ratio_NxT > eps_high),
    "dual": jnp.zeros(log_ratio_NxT.shape, bool),
  }
  return ratio_NxT, flags
