"""Entropy controls against entropy collapse: Clip-Cov and KL-Cov ("The Entropy Mechanism of
Reinforcement Learning for Reasoning Language Models", arXiv 2505.22617; verl
``compute_policy_loss_clip_cov`` / ``compute_policy_loss_kl_cov`` in
``verl/trainer/ppo/core_algos.py``).

The entropy falls where high-advantage tokens are already likely; both controls pick tokens by

  cov_t = (A_t − Ā)·(logπ_t − mean logπ),   means over the step's valid tokens (logπ constant)

and change only those tokens' loss terms, keeping them in every denominator:

  clip_cov   among the valid tokens the kind's clip left alone with lb < cov_t < ub, choose
             k = max(⌊r·n⌋, 1) uniformly at random (n the valid tokens): ℓ_t = 0 (no gradient)
  kl_cov     the k = max(⌊r·n⌋, 1) tokens of largest cov_t: ℓ_t += β_cov·|logπ_t − logπ_old,t|

r, lb, ub = ``loss.clip_cov_ratio``, ``clip_cov_lb``, ``clip_cov_ub``; r, β_cov =
``loss.kl_cov_ratio``, ``kl_cov_coef`` (verl's ``ppo_kl_coef``). verl selects within each
micro-batch (its loss sees one); here the selection is made ONCE per optimizer step over all its
rows (:func:`select`, the update's job) and reaches each micro-batch's loss as a mask
(``Terms.control_NxT``), so micro-batching never changes it. verl draws clip_cov's tokens with
``torch.randperm``; here with the step's PRNG key (a uniform score per token, the k highest).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from grpo_jax.losses import kinds
from grpo_jax.losses.registry import lookup

CONTROLS = ("none", "clip_cov", "kl_cov")


def applies(cfg_loss) -> bool:
  """Whether ``loss.entropy_control`` changes any token (not ``none``)."""
  name = cfg_loss.entropy_control
  lookup(dict.fromkeys(CONTROLS), name, "loss.entropy_control")  # an unknown name lists them
  return name != "none"


def count(n_valid, ratio: float):
  """k = max(⌊ratio·n⌋, 1), verl's ``max(int(ratio·n), 1)``, int32. A float32 product is off
  (10000 × 2e-4 gives 1.9999999; past 2^22 it cannot hold the fraction), so k is the high word
  of the exact 64-bit product n·P, P = ⌈ratio·2^32⌉, from 16-bit limbs in uint32."""
  n = jnp.asarray(n_valid).astype(jnp.uint32)
  if ratio >= 1.0:
    return jnp.maximum(n.astype(jnp.int32), 1)
  p = min(math.ceil(ratio * 2**32), 2**32 - 1)
  lo = jnp.uint32(0xFFFF)
  a1, a0 = n >> 16, n & lo
  b1, b0 = jnp.uint32(p >> 16), jnp.uint32(p & 0xFFFF)
  m1, m2 = a1 * b0, a0 * b1
  carry = (((a0 * b0) >> 16) + (m1 & lo) + (m2 & lo)) >> 16
  high = a1 * b1 + (m1 >> 16) + (m2 >> 16) + carry
  return jnp.maximum(high.astype(jnp.int32), 1)


def covariance_NxT(logps_NxT, adv_NxT, valid_NxT):
  """cov_t = (A_t − Ā)·(logπ_t − mean logπ), the means over valid tokens (0 elsewhere)."""
  n = jnp.maximum(jnp.sum(valid_NxT), 1).astype(logps_NxT.dtype)
  mean = lambda x: jnp.sum(jnp.where(valid_NxT, x, 0.0)) / n
  cov_NxT = (adv_NxT - mean(adv_NxT)) * (logps_NxT - mean(logps_NxT))
  return jnp.where(valid_NxT, cov_NxT, 0.0)


def _top(score_NxT, k, ratio: float):
  """The k highest scores above −inf (ties: the lower flat index), as a bool [N, T] mask;
  ``lax.top_k`` at the static bound k ≤ max(⌊ratio·N·T⌋, 1) + 1."""
  flat = score_NxT.reshape(-1)
  k_max = min(flat.size, max(int(flat.size * ratio), 1) + 1)
  vals, idx = jax.lax.top_k(flat, k_max)
  keep = (jnp.arange(k_max) < k) & (vals > -jnp.inf)
  return jnp.zeros(flat.shape, bool).at[idx].set(keep).reshape(score_NxT.shape)


def select(logps_NxT, old_logps_NxT, advantages_N, mask_NxT, cfg_loss, key):
  """The tokens ``loss.entropy_control`` acts on, bool [N, T] (a constant; all False for
  ``none``). Call it on the whole optimizer step's rows: ``logps_NxT`` log π_θ of the current
  parameters, ``old_logps_NxT`` log π_old (the same array at μ = 1), ``key`` the step's PRNG
  key (clip_cov's draw)."""
  valid_NxT = jnp.asarray(mask_NxT) > 0
  if not applies(cfg_loss):
    return jnp.zeros(valid_NxT.shape, bool)
  name = cfg_loss.entropy_control
  logps_NxT, old_logps_NxT, adv_NxT = kinds.masked_inputs(
    jax.lax.stop_gradient(logps_NxT), old_logps_NxT, advantages_N, valid_NxT
  )
  cov_NxT = covariance_NxT(logps_NxT, adv_NxT, valid_NxT)
  n = jnp.sum(valid_NxT)
  if name == "kl_cov":
    ratio = cfg_loss.kl_cov_ratio
    score_NxT = jnp.where(valid_NxT, cov_NxT, -jnp.inf)
  else:
    # Tokens the kind's clip already acted on are left to it (verl's clip_by_origin).
    flags = kinds.token_loss(logps_NxT, old_logps_NxT, adv_NxT, valid_NxT, cfg_loss).flags
    clipped_NxT = flags["low"] | flags["high"] | flags["dual"]
    band_NxT = (cov_NxT > cfg_loss.clip_cov_lb) & (cov_NxT < cfg_loss.clip_cov_ub)
    candidate_NxT = valid_NxT & ~clipped_NxT & band_NxT
    ratio = cfg_loss.clip_cov_ratio
    draw_NxT = jax.random.uniform(key, valid_NxT.shape)
    score_NxT = jnp.where(candidate_NxT, draw_NxT, -jnp.inf)
  return jax.lax.stop_gradient(_top(score_NxT, count(n, ratio), ratio))


def apply(loss_NxT, control_NxT, log_ratio_NxT, cfg_loss):
  """The per-token loss with the selected tokens' terms changed: 0 (clip_cov) or
  + β_cov·|logπ − logπ_old| (kl_cov, ``log_ratio_NxT`` the clamped token log-ratio)."""
  name = cfg_loss.entropy_control
  if name == "clip_cov":
    return jnp.where(control_NxT, 0.0, loss_NxT)
  if name == "kl_cov":
    # |x| as sign(x)·x: its gradient sign(x) is 0 at x = 0, as torch's abs (JAX's is 1).
    penalty_NxT = cfg_loss.kl_cov_coef * jnp.sign(log_ratio_NxT) * log_ratio_NxT
    return jnp.where(control_NxT, loss_NxT + penalty_NxT, loss_NxT)
  return loss_NxT


__all__ = ["CONTROLS", "applies", "apply", "count", "covariance_NxT", "select"]
