"""Importance ratios of the policy to the behaviour (old) policy, per token (METHODS §4).

Shapes: N rows, T completion tokens. Both functions take log-probs whose masked positions may
hold anything (padding, -inf): those positions are replaced by 0 before any arithmetic, so they
produce ratio 1 (token) or s_i (sequence) and, more importantly, no NaN in values or gradients.
``old_logps`` is always treated as a constant (stop-gradient).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def _masked_delta(logps_NxT, old_logps_NxT, valid_NxT):
  """logπ − sg(logπ_old) on valid tokens, 0 elsewhere (the inner where keeps grads NaN-free)."""
  logps_NxT = jnp.where(valid_NxT, logps_NxT, 0.0)
  old_logps_NxT = jax.lax.stop_gradient(jnp.where(valid_NxT, old_logps_NxT, 0.0))
  return logps_NxT - old_logps_NxT


def token_log_ratio(logps_NxT, old_logps_NxT, valid_NxT, log_clamp):
  """clip(logπ − logπ_old, −c, c): the clamped per-token log-ratio (0 on masked tokens).

  c = ``loss.ratio_log_clamp`` (20, as verl/OpenRLHF): exp(20) ≈ 4.9e8 stays finite in fp32
  while any |Δ| that large is already far outside every clip range. Outside the clamp the
  gradient is 0, as in verl.
  """
  delta_NxT = _masked_delta(logps_NxT, old_logps_NxT, valid_NxT)
  return jnp.clip(delta_NxT, -log_clamp, log_clamp)


def token_ratio(logps_NxT, old_logps_NxT, valid_NxT, log_clamp):
  """ρ_{i,t} = exp(clip(logπ_θ − logπ_old, −c, c)) (GRPO / DAPO / PPO token ratio). [N, T]."""
  return jnp.exp(token_log_ratio(logps_NxT, old_logps_NxT, valid_NxT, log_clamp))


def sequence_log_ratio(logps_NxT, old_logps_NxT, valid_NxT, log_clamp):
  """log s_i = clip(Σ_t m·(logπ_θ − logπ_old) / n_i, −c, c), n_i = Σ_t m (GSPO eq. 7). [N].

  A row with no valid token has n_i = 0: the sum is 0 and the divisor is taken as 1, so
  log s_i = 0 (s_i = 1) instead of 0/0.
  """
  delta_NxT = _masked_delta(logps_NxT, old_logps_NxT, valid_NxT)
  n_N = jnp.sum(valid_NxT, axis=1).astype(delta_NxT.dtype)
  log_s_N = jnp.sum(delta_NxT, axis=1) / jnp.maximum(n_N, 1.0)
  return jnp.clip(log_s_N, -log_clamp, log_clamp)


def sequence_ratio(logps_NxT, old_logps_NxT, valid_NxT, log_clamp):
  """GSPO-token ratio s_{i,t} = sg(s_i)·π_θ(y_t)/sg(π_θ(y_t)) (GSPO paper eq. 13-14). [N, T].

  The value of every token's ratio equals the sequence ratio s_i, so clipping it clips s_i; the
  gradient w.r.t. logπ_{i,t} is s_i (from π/sg(π) = exp(logπ − sg(logπ))). Under
  ``seq_mean_token_mean`` aggregation this reproduces exactly the gradient of the sequence-level
  objective, ∂s_i/∂logπ_{i,t} = s_i/n_i, while letting per-token weights be used if wanted.
  Written in log space, log s_{i,t} = sg(log s_i) + logπ − sg(logπ), as verl does.
  """
  log_s_N = jax.lax.stop_gradient(
    sequence_log_ratio(logps_NxT, old_logps_NxT, valid_NxT, log_clamp)
  )
  logps_NxT = jnp.where(valid_NxT, logps_NxT, 0.0)
  log_ratio_NxT = log_s_N[:, None] + logps_NxT - jax.lax.stop_gradient(logps_NxT)
  return jnp.exp(log_ratio_NxT)


# Ratio level by name; a loss kind picks one (see kinds.LOSS_KINDS).
RATIOS = {"token": token_ratio, "sequence": sequence_ratio}
