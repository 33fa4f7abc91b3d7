"""The PPO clipped surrogate with asymmetric and dual clip, per token (METHODS §4).

ℓ = max(−A·ρ, −A·clip(ρ, 1 − ε_low, 1 + ε_high));  dual clip (c > 1), only where A < 0:
ℓ = min(ℓ, −c·A) (Ye et al. 2020, "Mastering Complex Control in MOBA Games", eq. 5; verl
``clip_ratio_c``). Minimising ℓ maximises the PPO objective.
"""

from __future__ import annotations

import jax.numpy as jnp


def clipped_surrogate(ratio_NxT, adv_NxT, eps_low, eps_high, dual_clip):
  """Per-token loss and which clip branch is active.

  Args:
    ratio_NxT: importance ratio ρ (token ratio, or the GSPO token form whose value is s_i).
    adv_NxT: advantage broadcast over the row's tokens, 0 on masked tokens (a constant).
    eps_low, eps_high: clip range [1 − ε_low, 1 + ε_high] (Python floats).
    dual_clip: c > 1 caps the loss of A < 0 tokens at −c·A; 0 = off (Python float).

  Returns:
    loss_NxT and a dict of boolean [N, T] flags, each marking tokens whose gradient the clip
    removed (pitfall 15 of the research notes):
      ``low``:  ρ < 1 − ε_low and A < 0 (the clipped branch is the max);
      ``high``: ρ > 1 + ε_high and A > 0;
      ``dual``: A < 0 and the dual-clip cap −c·A is below the PPO loss (always False when off).
  """
  unclipped_NxT = -adv_NxT * ratio_NxT
  clipped_NxT = -adv_NxT * jnp.clip(ratio_NxT, 1.0 - eps_low, 1.0 + eps_high)
  loss_NxT = jnp.maximum(unclipped_NxT, clipped_NxT)
  flags = {
    "low": (ratio_NxT < 1.0 - eps_low) & (adv_NxT < 0),
    "high": (ratio_NxT > 1.0 + eps_high) & (adv_NxT > 0),
  }
  if dual_clip > 0:
    cap_NxT = -dual_clip * adv_NxT
    dual_NxT = (adv_NxT < 0) & (loss_NxT > cap_NxT)
    # where (not minimum): an exact tie keeps the PPO branch's full gradient.
    loss_NxT = jnp.where(dual_NxT, cap_NxT, loss_NxT)
  else:
    dual_NxT = jnp.zeros(loss_NxT.shape, bool)
  flags["dual"] = dual_NxT
  return loss_NxT, flags
