"""Rollout correction: the sampler's log-probs differ from the trainer's (a bf16 sampler, another
engine, stale parameters), so the batch is off-policy by the ratio

  w_t = π_old(y_t) / π_sampler(y_t) = exp(log π_old − log π_sampler),

π_old the trainer's own log-probs of the sampled tokens (the current policy with μ = 1, the
recomputed old policy with μ > 1). ``loss.rollout_correction`` (docs/losses.md):

  auto        none with our sampler, token_tis with an external engine (set at load)
  none        the surrogate as it is (w ignored)
  token_tis   truncated importance sampling: each token's term times sg(min(w_t, C)), C =
              ``loss.rollout_is_cap`` (2.0, verl's recipes)
  seq_mis     masked importance sampling: a row whose geometric-mean ratio
              w̄_i = exp(mean_t log w_t) lies outside [``rollout_mis_low``, ``rollout_mis_high``]
              weighs 0 (the step's denominators are kept, so the loss stays additive)

The weights are constants (stop-gradient). |log w_t| is clamped at ``LOG_CLAMP`` before exp.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

CORRECTIONS = ("auto", "none", "token_tis", "seq_mis")


def applies(cfg_loss) -> bool:
  """Whether the loss weighs tokens by w. ``auto`` is resolved when a config is loaded
  (``config.base.resolve_defaults``); a config built without loading reads it as ``none``."""
  return cfg_loss.rollout_correction not in ("none", "auto")


LOG_CLAMP = 20.0


def log_ratio(old_logps_NxT, sample_logps_NxT, valid_NxT) -> jax.Array:
  """log w_t = log π_old − log π_sampler on valid tokens (0 elsewhere), clamped."""
  log_w = jnp.where(valid_NxT, old_logps_NxT - sample_logps_NxT, 0.0)
  return jax.lax.stop_gradient(jnp.clip(log_w, -LOG_CLAMP, LOG_CLAMP))


def seq_kept_N(log_w_NxT, valid_NxT, low: float, high: float) -> jax.Array:
  """bool ``[N]``: rows whose geometric-mean ratio exp(mean_t log w_t) lies in [low, high]."""
  count_N = jnp.maximum(jnp.sum(valid_NxT, axis=1), 1)
  geo_N = jnp.exp(jnp.sum(log_w_NxT, axis=1) / count_N)
  return (geo_N >= low) & (geo_N <= high)


def weights_NxT(old_logps_NxT, sample_logps_NxT, valid_NxT, cfg_loss) -> jax.Array | None:
  """The per-token weight of the surrogate under ``cfg_loss.rollout_correction`` (None for
  ``none``), a constant."""
  kind = cfg_loss.rollout_correction
  if not applies(cfg_loss):
    return None
  log_w = log_ratio(old_logps_NxT, sample_logps_NxT, valid_NxT)
  if kind == "token_tis":
    return jnp.minimum(jnp.exp(log_w), cfg_loss.rollout_is_cap)
  if kind == "seq_mis":
    keep_N = seq_kept_N(log_w, valid_NxT, cfg_loss.rollout_mis_low, cfg_loss.rollout_mis_high)
    return jnp.broadcast_to(keep_N[:, None], log_w.shape).astype(log_w.dtype)
  raise ValueError(f"loss.rollout_correction {kind!r} is not one of {CORRECTIONS}")


def mismatch_metrics(logps_NxT, sample_logps_NxT, mask_NxT, valid_N, cfg_loss) -> dict:
  """Sampler-trainer mismatch over a whole batch's scored tokens:

  mismatch/kl              token mean of k3 = (w − 1) − log w: KL(π_sampler ‖ π_trainer) from
                           the sampler's tokens, ≥ 0, 0 exactly when the two agree
  mismatch/is_weight_mean  token mean of w (unclipped)
  mismatch/is_weight_max   its max over scored tokens
  mismatch/masked_frac     the share of valid rows ``seq_mis`` rejects (0 for other kinds)
  """
  valid_NxT = mask_NxT > 0
  log_w = log_ratio(logps_NxT, sample_logps_NxT, valid_NxT)
  w = jnp.exp(log_w)
  tokens = jnp.maximum(jnp.sum(valid_NxT), 1)
  mean = lambda x: jnp.sum(jnp.where(valid_NxT, x, 0.0)) / tokens
  masked = jnp.zeros((), jnp.float32)
  if cfg_loss.rollout_correction == "seq_mis":
    keep_N = seq_kept_N(log_w, valid_NxT, cfg_loss.rollout_mis_low, cfg_loss.rollout_mis_high)
    rows = jnp.maximum(jnp.sum(valid_N), 1)
    masked = jnp.sum(valid_N & ~keep_N) / rows
  return {
    "mismatch/kl": mean((w - 1.0) - log_w),
    "mismatch/is_weight_mean": mean(w),
    "mismatch/is_weight_max": jnp.max(jnp.where(valid_NxT, w, 0.0)),
    "mismatch/masked_frac": masked,
  }


__all__ = ["CORRECTIONS", "LOG_CLAMP", "log_ratio", "mismatch_metrics", "seq_kept_N", "weights_NxT"]
