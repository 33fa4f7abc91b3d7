"""HA-DW: the evolving difficulty anchor and the per-row weight Φ (METHODS §3, arXiv 2601.08521).

Anchor state (a flat dict of fixed-shape arrays, part of the train state, checkpointed):
  history  float32[h]  ring buffer, h = max(hadw.history, 1): batch accuracies y (window,
                       fixed, kalman/'observations') or posterior beliefs C⁺ (kalman/'beliefs')
  count    int32       valid entries in ``history`` (≤ h)
  belief   float32     C after the last update = the next step's prior C⁻
  step     int32       updates done so far (0 ⇒ the next step is the first: C⁻ := y_1)

Anchor kinds (``hadw.anchor``), y_t = the step's batch accuracy:
  window  C = mean of the last h accuracies (App. F hard update; the authors' code)
  kalman  C⁺ = (1 − η_t)·C⁻ + η_t·y_t, η_t = clip(η·σ_t, 0, 1) (Eq. 8-12), σ_t the population
          std of the buffer (the m = h previous beliefs or observations); σ_t := 1 while the
          buffer holds fewer than 2 values (the TRL PR's convention), so step 2 moves by η.
  fixed   C ≡ hadw.fixed_anchor (Table 2's 0.4/0.5/0.6)
The weight uses the prior C⁻ (Eq. 13) unless ``hadw.include_current`` (then C⁺, which for
``window`` is the authors' code: y_t appended before the weights are computed).

Weight (Eq. 13-16): d_g = p̂_g − C; M_g = |d_g|; D_i = −sgn(A_i)·sgn(d_g); Φ_i = λ·exp(D_i·M_g).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

ANCHORS = ("window", "kalman", "fixed")
SIGMA_OF = ("beliefs", "observations")
ANCHOR_KEYS = ("history", "count", "belief", "step")


def init_anchor(hadw_cfg) -> dict[str, jax.Array]:
  """Fresh anchor state for the ``hadw`` group (cheap; exists whether or not HA-DW is on)."""
  h = max(hadw_cfg.history, 1)
  return {
    "history": jnp.zeros((h,), jnp.float32),
    "count": jnp.zeros((), jnp.int32),
    "belief": jnp.zeros((), jnp.float32),
    "step": jnp.zeros((), jnp.int32),
  }


def _buffer_mean_std(history_H: jax.Array, count: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Mean and population std (two-pass) of the ``count`` valid ring-buffer entries."""
  mask_H = jnp.arange(history_H.shape[0]) < count
  n = jnp.maximum(count.astype(jnp.float32), 1.0)
  mean = jnp.sum(jnp.where(mask_H, history_H, 0.0)) / n
  var = jnp.sum(jnp.where(mask_H, jnp.square(history_H - mean), 0.0)) / n
  return mean, jnp.sqrt(var)


def _push(anchor: dict, value: jax.Array) -> tuple[jax.Array, jax.Array]:
  h = anchor["history"].shape[0]
  # Entries fill slots 0..h-1 and then overwrite the oldest; the mean/std ignore the order.
  history_H = anchor["history"].at[anchor["step"] % h].set(value)
  return history_H, jnp.minimum(anchor["count"] + 1, h)


def update_anchor(
  anchor: dict[str, jax.Array], batch_acc: jax.Array, hc
) -> tuple[jax.Array, dict[str, jax.Array], jax.Array]:
  """One anchor step from the batch accuracy y_t. Returns (C used by Φ, new state, η_t).

  ``hc`` is the ``hadw`` group. η_t is 0 except for ``kalman``.
  """
  kind = hc.anchor
  y = jnp.asarray(batch_acc, jnp.float32)
  first = anchor["step"] == 0
  prior = jnp.where(first, y, anchor["belief"])  # METHODS §3: C⁻ := y_1 on the first step
  eta = jnp.zeros((), jnp.float32)
  if kind == "window":
    history_H, count = _push(anchor, y)
    posterior, _ = _buffer_mean_std(history_H, count)
  elif kind == "kalman":
    _, sigma = _buffer_mean_std(anchor["history"], anchor["count"])
    sigma = jnp.where(anchor["count"] >= 2, sigma, 1.0)
    # The clamp keeps C⁺ a convex combination (the TRL PR has none and can overshoot).
    eta = jnp.where(first, 0.0, jnp.clip(hc.eta * sigma, 0.0, 1.0))
    posterior = (1.0 - eta) * prior + eta * y
    history_H, count = _push(anchor, posterior if hc.sigma_of == "beliefs" else y)
  else:  # fixed
    prior = posterior = jnp.asarray(hc.fixed_anchor, jnp.float32)
    history_H, count = _push(anchor, y)
  new_anchor = {
    "history": history_H,
    "count": count.astype(jnp.int32),
    "belief": posterior.astype(jnp.float32),
    "step": (anchor["step"] + 1).astype(jnp.int32),
  }
  used = posterior if hc.include_current else prior
  return used.astype(jnp.float32), new_anchor, eta.astype(jnp.float32)


def hadw_weights(
  adv_N: jax.Array, group_mean_N: jax.Array, anchor_value: jax.Array, lambda_scale: float
) -> tuple[jax.Array, jax.Array]:
  """Φ_i = λ·exp(D_i·M_g) with D_i = −sgn(A_i)·sgn(p̂_g − C), M_g = |p̂_g − C| (Eq. 13-16).

  Returns (phi_N, direction_N). Hard prompt (p̂ < C): correct rows boosted (D = +1), incorrect
  softened; easy prompts the reverse; p̂ = C or A_i = 0 gives Φ = λ. Φ ∈ [λ/e, λ·e].
  """
  d_N = group_mean_N - anchor_value
  direction_N = -jnp.sign(adv_N) * jnp.sign(d_N)
  phi_N = float(lambda_scale) * jnp.exp(direction_N * jnp.abs(d_N))
  return phi_N, direction_N
