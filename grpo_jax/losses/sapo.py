"""SAPO: a soft, temperature-gated trust region in place of the clip ("Soft Adaptive Policy
Optimization", arXiv 2511.20347; verl ``compute_policy_loss_sapo`` in
``verl/trainer/ppo/core_algos.py``).

  ℓ_t = −f(ρ_t, τ_t)·A,   f(ρ, τ) = sigmoid(τ(ρ − 1))·4/τ,   τ_t = τ_pos if A > 0 else τ_neg

∂f/∂logπ = 4·σ(1 − σ)·ρ with σ = sigmoid(τ(ρ − 1)): 1 on-policy (ρ = 1, the plain policy
gradient −A), decaying smoothly as ρ leaves 1, never cut to 0 as the PPO clip does. τ_neg > τ_pos
damps negative-advantage tokens sooner (the paper's 1.05 against 1.0).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def token_loss(ratio_NxT, adv_NxT, tau_pos, tau_neg):
  """ℓ_NxT = −sigmoid(τ(ρ − 1))·(4/τ)·A, τ = ``tau_pos`` where A > 0 else ``tau_neg``."""
  tau_NxT = jnp.where(adv_NxT > 0, tau_pos, tau_neg).astype(ratio_NxT.dtype)
  gate_NxT = jax.nn.sigmoid(tau_NxT * (ratio_NxT - 1.0)) * (4.0 / tau_NxT)
  return -gate_NxT * adv_NxT
