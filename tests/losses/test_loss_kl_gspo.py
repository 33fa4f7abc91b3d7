"""KL estimators against their hand formulas and the ±10 clamp; the GSPO sequence ratio and its
stop-gradient token form (METHODS §4; GSPO paper eqs. 7, 13-14)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grpo_jax import losses
from grpo_jax.config import defaults

DELTAS = [-15.0, -11.0, -3.0, -0.5, -1e-3, 0.0, 1e-3, 0.7, 4.0, 9.9, 11.0, 12.5]


def hand_kl(delta, est):
  d = min(max(delta, -10.0), 10.0)
  return {"k1": d, "k2": 0.5 * d * d, "k3": math.exp(-d) + d - 1.0}[est]


@pytest.mark.parametrize("est", ["k1", "k2", "k3"])
def test_kl_values_and_clamp(est):
  ref = -np.linspace(0.1, 3.0, len(DELTAS))[None]
  logp = ref + np.array(DELTAS)[None]
  with jax.enable_x64(True):
    kl = np.asarray(losses.kl_penalty(jnp.asarray(logp), jnp.asarray(ref), est))[0]
    grad = np.asarray(
      jax.grad(lambda lp: losses.kl_penalty(lp, ref, est).sum())(jnp.asarray(logp))
    )[0]
  for d, got, g in zip(DELTAS, kl, grad):
    assert got == pytest.approx(hand_kl(d, est), rel=1e-12, abs=1e-15), d
    # Hand derivatives inside the clamp: 1, δ, 1 − e^{−δ}; none outside.
    want = 0.0 if abs(d) > 10 else {"k1": 1.0, "k2": d, "k3": -math.expm1(-d)}[est]
    assert g == pytest.approx(want, rel=1e-12, abs=1e-15), d
  assert kl[0] == kl[1] and kl[-1] == kl[-2]  # clamped at ±10


def test_kl_clamp_bounds_k3_and_reference_gets_no_gradient():
  logp = jnp.zeros((1, 2))
  ref = jnp.array([[1e4, -1e4]], jnp.float32)
  kl = losses.kl_penalty(logp, ref, "k3")
  assert np.all(np.isfinite(kl)) and float(kl[0, 0]) == pytest.approx(math.exp(10) - 11, rel=1e-6)
  g_ref = jax.grad(lambda r: losses.kl_penalty(logp + 0.1, r, "k2").sum())(jnp.zeros((1, 2)))
  assert np.all(np.asarray(g_ref) == 0)


def test_k3_is_accurate_for_small_gaps_in_float32():
  d = np.float32(1e-4)
  k3 = float(losses.kl_penalty(jnp.full((1, 1), d), jnp.zeros((1, 1)), "k3")[0, 0])
  exact = math.exp(-float(d)) + float(d) - 1.0  # ≈ δ²/2 = 5e-9
  assert k3 == pytest.approx(exact, rel=1e-3)
  assert (
    float(
      jnp.min(losses.kl_penalty(jnp.linspace(-5, 5, 101)[None], 0.0 * jnp.ones((1, 101)), "k3"))
    )
    >= 0.0
  )


def gspo_inputs(seed=0):
  rng = np.random.default_rng(seed)
  lengths = np.array([6, 3, 0, 5, 1, 6])
  width = 6
  mask = (np.arange(width)[None] < lengths[:, None]).astype(np.float64)
  logp = -rng.uniform(0.1, 2.0, (len(lengths), width))
  # Per-row gap scale: rows 0 and 4 stay inside GSPO's 3e-4/4e-4 range, the others leave it.
  scale = np.array([1e-5, 0.3, 0.0, 0.5, 1e-4, 0.2])[:, None]
  old = logp + scale * rng.normal(size=logp.shape)
  adv = np.array([0.7, -1.2, 0.4, 0.9, -0.5, -0.8])
  logp[mask == 0] = np.nan
  old[mask == 0] = np.nan
  return logp, old, adv, mask


def test_sequence_ratio_equals_s_i_on_every_token():
  logp, old, _, mask = gspo_inputs()
  with jax.enable_x64(True):
    ratio = np.asarray(losses.sequence_ratio(logp, old, mask > 0, 20.0))
    log_s = np.asarray(losses.sequence_log_ratio(logp, old, mask > 0, 20.0))
  for i in range(len(mask)):
    valid = mask[i] > 0
    s = math.exp(np.mean((logp[i] - old[i])[valid])) if valid.any() else 1.0
    assert math.exp(log_s[i]) == pytest.approx(s, rel=1e-12)
    np.testing.assert_allclose(ratio[i][valid], s, rtol=1e-12)
  # The log of s_i is clamped like the token log-ratio.
  far = losses.sequence_log_ratio(jnp.zeros((1, 3)), jnp.full((1, 3), -1e3), jnp.ones((1, 3)), 20.0)
  assert float(far[0]) == 20.0


def test_gspo_gradient_matches_the_sequence_level_definition():
  logp, old, adv, mask = gspo_inputs()
  cfg = defaults({"loss.kind": "gspo", "loss.aggregation": "seq_mean_token_mean"}).loss
  eps_low, eps_high = losses.resolve_clip(cfg)
  valid = mask > 0
  n = mask.sum(1)
  seqs = float((n > 0).sum())

  def definition(lp):
    # J_GSPO (eq. 5): per sequence max(−A s_i, −A clip(s_i)), s_i = exp(mean_t Δ), no sg.
    delta = jnp.where(valid, lp - old, 0.0)
    s = jnp.exp(delta.sum(1) / jnp.maximum(n, 1))
    per_seq = jnp.maximum(-adv * s, -adv * jnp.clip(s, 1 - eps_low, 1 + eps_high))
    return jnp.sum(jnp.where(n > 0, per_seq, 0.0)) / seqs

  with jax.enable_x64(True):
    denoms = losses.denominators(mask, cfg)
    loss_fn = lambda lp: losses.policy_loss(lp, old, adv, mask, cfg, denoms)[0]
    loss, grad = jax.value_and_grad(loss_fn)(jnp.asarray(logp))
    want_loss, want_grad = jax.value_and_grad(definition)(jnp.asarray(np.nan_to_num(logp)))
    grad, want_grad = np.asarray(grad), np.asarray(want_grad)
  assert float(loss) == pytest.approx(float(want_loss), rel=1e-12)
  np.testing.assert_allclose(grad[valid], want_grad[valid], rtol=1e-10, atol=1e-15)
  assert np.all(grad[~valid] == 0)
  # Hand form: rows inside the clip range get −A_i s_i / (n_i S) on each token, the rest 0.
  s = np.exp(np.where(valid, logp - old, 0.0).sum(1) / np.maximum(n, 1))
  inside = (s >= 1 - eps_low) & (s <= 1 + eps_high) & (n > 0)
  assert inside[[0, 4]].all() and not inside[[1, 3, 5]].any()
  for i in range(len(n)):
    want = -adv[i] * s[i] / (n[i] * seqs) if inside[i] else 0.0
    np.testing.assert_allclose(grad[i][valid[i]], want, rtol=1e-10, atol=1e-15)
