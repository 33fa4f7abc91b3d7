"""Rollout correction (``loss.rollout_correction``, docs/losses.md): token-level truncated IS and
sequence-level masked IS against hand-computed weights, the mismatch metrics by hand, and each
key flipping the loss."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grpo_jax import losses
from grpo_jax.losses import correction
from tests.losses.test_loss_config import make_cfg

# Two rows of three tokens (the second has two); μ = 1, so old = current.
LOGP = np.array([[-1.0, -2.0, -0.5], [-0.3, -1.2, 0.0]], np.float32)
SAMPLE = np.array([[-1.5, -1.0, -0.5], [-0.3, -0.2, 0.0]], np.float32)  # log w = .5, -1, 0 | 0, -1
MASK = np.array([[1, 1, 1], [1, 1, 0]], np.float32)
ADV = np.array([1.0, -2.0], np.float32)


cfg = make_cfg  # the validated ``loss`` group with the given keys


def loss_and_grad(c, sample=SAMPLE):
  denoms = losses.denominators(MASK, c)
  terms = losses.Terms(sample_logps_NxT=sample)
  f = lambda lp: losses.policy_loss(lp, jax.lax.stop_gradient(lp), ADV, MASK, c, denoms, terms)[0]
  return jax.value_and_grad(f)(jnp.asarray(LOGP))


def test_token_tis_weighs_each_token_by_its_capped_ratio():
  # μ = 1: ρ = 1, ℓ_t = −A; token_mean over 5 tokens; w = min(exp(log w), C).
  w = np.minimum(np.exp(np.array([[0.5, -1.0, 0.0], [0.0, -1.0, 0.0]])), 1.5) * MASK
  loss, grad = loss_and_grad(cfg(rollout_correction="token_tis", rollout_is_cap=1.5))
  expected = float(np.sum(-ADV[:, None] * w) / 5)
  np.testing.assert_allclose(float(loss), expected, rtol=1e-6)
  # ∂L/∂logπ_t = −A·w_t / 5 (the weight is a constant; ∂ρ/∂logπ = 1 at ρ = 1).
  np.testing.assert_allclose(np.asarray(grad), -ADV[:, None] * w / 5, rtol=1e-6)
  plain, plain_grad = loss_and_grad(cfg())
  np.testing.assert_allclose(float(plain), float(np.sum(-ADV[:, None] * MASK) / 5), rtol=1e-6)
  assert not np.allclose(np.asarray(grad), np.asarray(plain_grad))
  # The cap reaches the math: e^0.5 = 1.65 is capped at 1.5, not at 2.
  assert float(loss_and_grad(cfg(rollout_correction="token_tis"))[0]) != pytest.approx(expected)


def test_seq_mis_drops_rows_outside_the_band_and_keeps_the_denominators():
  # Geometric means: row 0 exp((0.5 − 1 + 0)/3) = 0.846; row 1 exp(−1/2) = 0.607.
  c = cfg(rollout_correction="seq_mis", rollout_mis_low=0.7, rollout_mis_high=2.0)
  loss, grad = loss_and_grad(c)
  np.testing.assert_allclose(float(loss), -1.0 * 3 / 5, rtol=1e-6)  # row 1 weighs 0
  assert np.all(np.asarray(grad)[1] == 0.0) and np.all(np.asarray(grad)[0] != 0.0)
  both = cfg(rollout_correction="seq_mis", rollout_mis_low=0.5, rollout_mis_high=2.0)
  np.testing.assert_allclose(float(loss_and_grad(both)[0]), (-3.0 + 2 * 2.0) / 5, rtol=1e-6)
  neither = cfg(rollout_correction="seq_mis", rollout_mis_low=0.9, rollout_mis_high=2.0)
  assert float(loss_and_grad(neither)[0]) == 0.0
  # Above the band: a sampler 0.1 nats below the trainer on every token, w̄ = e^0.1 = 1.105.
  high = cfg(rollout_correction="seq_mis", rollout_mis_low=0.5, rollout_mis_high=1.05)
  assert float(loss_and_grad(high, sample=LOGP - 0.1)[0]) == 0.0
  wide = cfg(rollout_correction="seq_mis", rollout_mis_low=0.5, rollout_mis_high=1.2)
  np.testing.assert_allclose(float(loss_and_grad(wide, sample=LOGP - 0.1)[0]), 0.2, rtol=1e-5)


def test_no_correction_without_sampler_logps_is_an_error():
  c = cfg(rollout_correction="token_tis")
  denoms = losses.denominators(MASK, c)
  with pytest.raises(ValueError, match="needs the sampler's log-probs"):
    losses.policy_loss(LOGP, LOGP, ADV, MASK, c, denoms)


def test_mismatch_metrics_by_hand():
  log_w = np.array([[0.5, -1.0, 0.0], [0.0, -1.0, 0.0]])
  w = np.exp(log_w)
  valid = MASK > 0
  k3 = (w - 1.0) - log_w
  c = cfg(rollout_correction="seq_mis", rollout_mis_low=0.7, rollout_mis_high=2.0)
  m = losses.mismatch_metrics(LOGP, SAMPLE, MASK, np.array([True, True]), c)
  np.testing.assert_allclose(float(m["mismatch/kl"]), k3[valid].mean(), rtol=1e-6)
  np.testing.assert_allclose(float(m["mismatch/is_weight_mean"]), w[valid].mean(), rtol=1e-6)
  np.testing.assert_allclose(float(m["mismatch/is_weight_max"]), math.exp(0.5), rtol=1e-6)
  assert float(m["mismatch/masked_frac"]) == 0.5
  same = losses.mismatch_metrics(LOGP, LOGP, MASK, np.array([True, True]), cfg())
  assert float(same["mismatch/kl"]) == 0.0 and float(same["mismatch/is_weight_max"]) == 1.0
  # Padding rows are no rows.
  padded = losses.mismatch_metrics(LOGP, SAMPLE, MASK, np.array([True, False]), c)
  assert float(padded["mismatch/masked_frac"]) == 0.0


def test_log_ratios_are_clamped():
  big = correction.log_ratio(jnp.array([[0.0]]), jnp.array([[-100.0]]), jnp.array([[True]]))
  assert float(big[0, 0]) == correction.LOG_CLAMP
