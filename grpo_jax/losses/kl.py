"""Per-token KL penalty to the frozen reference policy (METHODS §4; Schulman's k1/k2/k3).

δ = clip(logπ_θ − logπ_ref, −10, 10)  (verl / OpenRLHF clamp; TRL does not clamp and has seen
k3 ≈ 7e9 from exp(−δ) overflow):

  k1 = δ                     unbiased value, signed, high variance
  k2 = ½δ²                   biased value; its gradient δ·∇logπ is the unbiased KL gradient
  k3 = e^{−δ} + δ − 1 ≥ 0    unbiased, low-variance value (default; verl ``low_var_kl``)

k3 is computed as expm1(−δ) + δ, which keeps the O(δ²) value accurate for small δ where
exp(−δ) − 1 + δ cancels to rounding noise in float32. Outside the ±10 clamp the gradient is 0.
The reference log-probs are a constant (stop-gradient); the penalty's gradient flows through
logπ_θ only. Masking and aggregation happen in ``policy_loss``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from grpo_jax.losses.registry import lookup

# Bound on |logπ_θ − logπ_ref| before any estimator (exp(10) ≈ 2.2e4 stays finite).
KL_CLAMP = 10.0


def k1(delta_NxT):
  """k1 = δ."""
  return delta_NxT


def k2(delta_NxT):
  """k2 = ½δ²."""
  return 0.5 * jnp.square(delta_NxT)


def k3(delta_NxT):
  """k3 = e^{−δ} + δ − 1, as expm1(−δ) + δ."""
  return jnp.expm1(-delta_NxT) + delta_NxT


# Estimator by name (``loss.kl_estimator``).
KL_ESTIMATORS = {"k1": k1, "k2": k2, "k3": k3}


def kl_penalty(logps_NxT, ref_logps_NxT, estimator: str):
  """Per-token KL estimate of π_θ to π_ref from sampled-token log-probs. [N, T] -> [N, T]."""
  fn = lookup(KL_ESTIMATORS, estimator, "loss.kl_estimator")
  delta_NxT = logps_NxT - jax.lax.stop_gradient(ref_logps_NxT)
  return fn(jnp.clip(delta_NxT, -KL_CLAMP, KL_CLAMP))
