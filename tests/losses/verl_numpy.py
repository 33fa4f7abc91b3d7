"""verl's rollout correction in NumPy, written from ``verl/trainer/ppo/rollout_corr_helper.py``
(``compute_rollout_correction_weights``, ``compute_rollout_rejection_mask`` and the veto of
``compute_rollout_correction_and_rejection_mask``) and the presets of its
``RolloutCorrectionConfig`` (``decoupled_token_is``, ``decoupled_seq_is``,
``decoupled_seq_is_rs``, ``decoupled_geo_rs``), independently of ``grpo_jax.losses.correction``:
an oracle for its tests. verl's order: the token log ratio is taken unclamped, a row's sum or
mean is clamped to ±20 before exp, IS weights are zeroed on padding and truncated above, and the
veto compares the raw token log ratio with log(veto)."""

from __future__ import annotations

import numpy as np

SAFETY_BOUND = 20.0

# preset -> (rollout_is, is_threshold, rollout_rs, rs_threshold, rs_threshold_lower, veto)
PRESETS = {
  "token_tis": ("token", 2.0, None, None, None, None),
  "seq_tis": ("sequence", 2.0, None, None, None, None),
  "seq_mis": ("sequence", 2.0, "sequence", 2.0, None, None),
  "geo_mis": (None, None, "geometric", 1.001, None, 1e-4),
}


def _row_stat(log_ratio, mask, level):
  total = (log_ratio * mask).sum(-1, keepdims=True)
  if level == "geometric":
    total = total / mask.sum(-1, keepdims=True)
  return np.exp(np.clip(total, -SAFETY_BOUND, SAFETY_BOUND))


def weights(log_ratio, mask, level, threshold):
  """IS weights [N, T] (0 on padding), truncated above at ``threshold``."""
  if level == "token":
    w = np.exp(np.clip(log_ratio, -SAFETY_BOUND, SAFETY_BOUND))
  else:
    w = np.broadcast_to(_row_stat(log_ratio, mask, "sequence"), log_ratio.shape)
  return np.minimum(w * mask, threshold)


def correct(old_logp, rollout_logp, mask, preset, **overrides):
  """(IS weights or None, the response mask after rejection and veto, vetoed rows [N])."""
  is_level, is_thr, rs_level, rs_hi, rs_lo, veto = PRESETS[preset]
  rs_hi = overrides.get("rs_high", rs_hi)
  rs_lo = overrides.get("rs_low", rs_lo)
  veto = overrides.get("veto", veto)
  mask = np.asarray(mask, np.float64)
  log_ratio = np.asarray(old_logp, np.float64) - np.asarray(rollout_logp, np.float64)
  log_ratio = np.where(mask > 0, log_ratio, 0.0)
  w = None if is_level is None else weights(log_ratio, mask, is_level, is_thr)
  out = mask.copy()
  if rs_level is not None:
    lower = rs_lo if rs_lo is not None else 1.0 / rs_hi
    stat = _row_stat(log_ratio, mask, rs_level)
    out = out * ((stat >= lower) & (stat <= rs_hi))
  vetoed = np.zeros(mask.shape[0], bool)
  if veto:
    vetoed = ((log_ratio < np.log(veto)) & (mask > 0)).any(-1)
    out = out * ~vetoed[:, None]
  return w, out, vetoed
