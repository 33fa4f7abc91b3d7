"""Rollout correction (``loss.rollout_correction``, docs/losses.md, METHODS §8): verl's presets
against hand-computed weights and rejections (the two 20-token rows of METHODS statement 23
among them) and against a NumPy transcription of verl's formulas (``verl_numpy``); rejected
rows leave the step's denominators; the mismatch metrics by hand; each key flipping the
output."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grpo_jax import losses
from grpo_jax.losses import correction
from tests.losses import verl_numpy
from tests.losses.test_loss_config import make_cfg

# Two rows of three tokens (the second has two); μ = 1, so old = current.
LOGP = np.array([[-1.0, -2.0, -0.5], [-0.3, -1.2, 0.0]], np.float32)
SAMPLE = np.array([[-1.5, -1.0, -0.5], [-0.3, -0.2, 0.0]], np.float32)  # log ρ = .5, -1, 0 | 0, -1
MASK = np.array([[1, 1, 1], [1, 1, 0]], np.float32)
ADV = np.array([1.0, -2.0], np.float32)

cfg = make_cfg  # the validated ``loss`` group with the given keys


def loss_and_grad(c, sample=SAMPLE, mask=MASK, logp=LOGP, adv=ADV):
  """The loss as the update computes it: rejection first, denominators from what is left."""
  mask = correction.reject(logp, sample, mask, c).mask_NxT if correction.rejects(c) else mask
  denoms = losses.denominators(mask, c)
  terms = losses.Terms(sample_logps_NxT=sample)
  f = lambda lp: losses.policy_loss(lp, jax.lax.stop_gradient(lp), adv, mask, c, denoms, terms)[0]
  return jax.value_and_grad(f)(jnp.asarray(logp))


def twenty_token_rows():
  """METHODS §8 statement 23: row 0 every log ρ_t = +0.05 (product e = 2.72, geometric mean
  1.051); row 1 one log ρ_t = −10, the rest 0 (product 4.54e-5, geometric mean 0.607)."""
  old = np.full((2, 20), -1.0, np.float32)
  sample = old.copy()
  sample[0] -= 0.05
  sample[1, 7] += 10.0
  return old, sample, np.ones((2, 20), np.float32)


def test_token_tis_weighs_each_token_by_its_capped_ratio():
  # μ = 1: ρ = 1, ℓ_t = −A; token_mean over 5 tokens; w = min(exp(log ρ), c).
  w = np.minimum(np.exp(np.array([[0.5, -1.0, 0.0], [0.0, -1.0, 0.0]])), 1.5) * MASK
  loss, grad = loss_and_grad(cfg(rollout_correction="token_tis", rollout_is_cap=1.5))
  expected = float(np.sum(-ADV[:, None] * w) / 5)
  np.testing.assert_allclose(float(loss), expected, rtol=1e-6)
  # ∂L/∂logπ_t = −A·w_t / 5 (the weight is a constant; ∂ρ/∂logπ = 1 at ρ = 1).
  np.testing.assert_allclose(np.asarray(grad), -ADV[:, None] * w / 5, rtol=1e-6)
  plain, plain_grad = loss_and_grad(cfg(rollout_correction="none"))
  np.testing.assert_allclose(float(plain), float(np.sum(-ADV[:, None] * MASK) / 5), rtol=1e-6)
  assert not np.allclose(np.asarray(grad), np.asarray(plain_grad))
  # The cap reaches the math: e^0.5 = 1.65 is capped at 1.5, not at 2.
  assert float(loss_and_grad(cfg(rollout_correction="token_tis"))[0]) != pytest.approx(expected)


def test_seq_tis_weighs_each_row_by_its_capped_product():
  # Row products: exp(0.5 − 1 + 0) = 0.607, exp(0 − 1) = 0.368; both below c.
  w_N = np.exp(np.array([-0.5, -1.0]))
  loss, grad = loss_and_grad(cfg(rollout_correction="seq_tis"))
  np.testing.assert_allclose(float(loss), float(np.sum(-ADV * w_N * MASK.sum(1)) / 5), rtol=1e-6)
  np.testing.assert_allclose(np.asarray(grad), (-ADV * w_N)[:, None] * MASK / 5, rtol=1e-6)
  # Truncated at c: a sampler 0.5 nats below on every token (product e^1.5, e^1.0).
  capped = loss_and_grad(cfg(rollout_correction="seq_tis", rollout_is_cap=1.5), LOGP - 0.5)[0]
  w_N = np.minimum(np.exp([1.5, 1.0]), 1.5)
  np.testing.assert_allclose(float(capped), float(np.sum(-ADV * w_N * MASK.sum(1)) / 5), rtol=1e-6)


def test_the_twenty_token_rows_of_methods_statement_23():
  old, sample, mask = twenty_token_rows()
  valid = mask > 0
  seq_w = correction.weights_NxT(old, sample, valid, cfg(rollout_correction="seq_tis"))
  np.testing.assert_allclose(np.asarray(seq_w)[:, 0], [2.0, math.exp(-10.0)], rtol=1e-5)
  for name, rejected, vetoed in (
    ("seq_mis", [True, True], [False, False]),  # product 2.72 > 2; 4.54e-5 < 0.5
    ("geo_mis", [True, True], [False, True]),  # 1.051 > 1.001; 0.607 < 0.999 and a ρ_t < 1e-4
    ("seq_tis", [False, False], [False, False]),
    ("token_tis", [False, False], [False, False]),
  ):
    c = cfg(rollout_correction=name)
    r = correction.reject(old, sample, mask, c)
    assert correction.rejects(c) == any(rejected)
    np.testing.assert_array_equal(np.asarray(r.rejected_N), rejected, err_msg=name)
    np.testing.assert_array_equal(np.asarray(r.vetoed_N), vetoed, err_msg=name)
    np.testing.assert_array_equal(np.asarray(r.mask_NxT), mask * ~np.array(rejected)[:, None])
  # The veto alone: geometric bounds wide enough to keep row 1 (0.607 > 0.5), the veto rejects it.
  wide = cfg(rollout_correction="geo_mis", rollout_rs_high=2.0)
  r = correction.reject(old, sample, mask, wide)
  np.testing.assert_array_equal(np.asarray(r.rejected_N), [False, True])
  np.testing.assert_array_equal(np.asarray(r.vetoed_N), [False, True])
  no_veto = cfg(rollout_correction="geo_mis", rollout_rs_high=2.0, rollout_veto=0.0)
  assert not np.asarray(correction.reject(old, sample, mask, no_veto).rejected_N).any()


@pytest.mark.parametrize("name", ["token_tis", "seq_tis", "seq_mis", "geo_mis"])
def test_presets_equal_verls_formulas(name):
  rng = np.random.default_rng(0)
  old = rng.normal(-2.0, 1.0, (64, 24)).astype(np.float32)
  # Sampler log-probs off by noise of growing size, so every preset keeps and rejects rows.
  scale = np.linspace(0.0, 0.08, 64)[:, None] * (1 + (np.arange(64) % 4 == 0)[:, None] * 50)
  sample = (old + rng.normal(0.0, 1.0, old.shape) * scale).astype(np.float32)
  mask = (np.arange(24)[None, :] < rng.integers(4, 25, 64)[:, None]).astype(np.float32)
  c = cfg(rollout_correction=name)
  w_ref, mask_ref, veto_ref = verl_numpy.correct(old, sample, mask, name)
  w = correction.weights_NxT(old, sample, mask > 0, c)
  assert (w is None) == (w_ref is None)
  if w is not None:
    np.testing.assert_allclose(np.asarray(w) * mask, w_ref, rtol=2e-5)
  r = correction.reject(old, sample, mask, c)
  np.testing.assert_array_equal(np.asarray(r.mask_NxT), mask_ref)
  np.testing.assert_array_equal(np.asarray(r.vetoed_N), veto_ref)
  kept = int((mask_ref.sum(1) > 0).sum())
  if correction.rejects(c):
    assert 0 < kept < 64, f"{name}: the rows must test both sides ({kept} kept)"


def test_rejected_rows_leave_the_denominators():
  # seq_mis with a band that rejects row 1 (product 0.368 < 0.5) and keeps row 0 (0.607).
  c = cfg(rollout_correction="seq_mis", rollout_rs_low=0.5, rollout_rs_high=2.0)
  loss, grad = loss_and_grad(c)
  # Row 0 alone, as if row 1 had never been sampled: its 3 tokens are the denominator.
  alone, alone_grad = loss_and_grad(c, SAMPLE[:1], MASK[:1], LOGP[:1], ADV[:1])
  np.testing.assert_allclose(float(loss), float(alone), rtol=1e-6)
  np.testing.assert_allclose(float(loss), -1.0 * math.exp(-0.5), rtol=1e-6)  # -A·w, over 3
  assert np.all(np.asarray(grad)[1] == 0.0)
  np.testing.assert_allclose(np.asarray(grad)[:1], np.asarray(alone_grad), rtol=1e-6)
  # The bounds reach the math: a lower bound of 0.3 keeps both rows.
  both = loss_and_grad(cfg(rollout_correction="seq_mis", rollout_rs_low=0.3))[0]
  w_N = np.exp(np.array([-0.5, -1.0]))
  np.testing.assert_allclose(float(both), float(np.sum(-ADV * w_N * MASK.sum(1)) / 5), rtol=1e-6)
  # An upper bound: a sampler 0.1 nats below the trainer on every token, products e^0.3, e^0.2.
  high = cfg(rollout_correction="seq_mis", rollout_rs_high=1.25)
  kept = correction.reject(LOGP, LOGP - 0.1, MASK, high).rejected_N
  np.testing.assert_array_equal(np.asarray(kept), [True, False])


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
  c = cfg(rollout_correction="geo_mis", rollout_rs_high=1.2, rollout_veto=0.5)
  rows = np.array([True, True])
  r = correction.reject(LOGP, SAMPLE, MASK, c)
  m = losses.mismatch_metrics(LOGP, SAMPLE, MASK, rows, r, veto=True)
  np.testing.assert_allclose(float(m["mismatch/kl"]), k3[valid].mean(), rtol=1e-6)
  np.testing.assert_allclose(float(m["mismatch/is_weight_mean"]), w[valid].mean(), rtol=1e-6)
  np.testing.assert_allclose(float(m["mismatch/is_weight_max"]), math.exp(0.5), rtol=1e-6)
  # Geometric means 0.846 (kept by [1/1.2, 1.2]) and 0.607 (out); both hold ρ = e^-1 < 0.5.
  assert float(m["mismatch/masked_frac"]) == 1.0 and float(m["mismatch/veto_frac"]) == 1.0
  lenient = cfg(rollout_correction="geo_mis", rollout_rs_high=1.2, rollout_veto=0.0)
  m = losses.mismatch_metrics(
    LOGP, SAMPLE, MASK, rows, correction.reject(LOGP, SAMPLE, MASK, lenient)
  )
  assert float(m["mismatch/masked_frac"]) == 0.5 and "mismatch/veto_frac" not in m  # no veto
  same = losses.mismatch_metrics(LOGP, LOGP, MASK, rows)
  assert float(same["mismatch/kl"]) == 0.0 and float(same["mismatch/is_weight_max"]) == 1.0
  assert "mismatch/masked_frac" not in same  # nothing rejects
  # Padding rows are no rows.
  padded = losses.mismatch_metrics(LOGP, SAMPLE, MASK, np.array([True, False]), r, veto=True)
  assert float(padded["mismatch/masked_frac"]) == 1.0
  assert float(padded["mismatch/veto_frac"]) == 1.0


def test_log_ratios_are_clamped():
  big = correction.log_ratio(jnp.array([[0.0]]), jnp.array([[-100.0]]), jnp.array([[True]]))
  assert float(big[0, 0]) == correction.LOG_CLAMP


def test_preset_defaults_and_keys():
  assert correction.bounds(cfg(rollout_correction="seq_mis")) == (0.5, 2.0, 0.0)
  assert correction.bounds(cfg(rollout_correction="geo_mis")) == (1 / 1.001, 1.001, 1e-4)
  assert correction.bounds(cfg(rollout_correction="token_tis", rollout_veto=1e-3))[2] == 1e-3
  assert correction.rejects(cfg(rollout_correction="token_tis", rollout_veto=1e-3))
  assert not correction.rejects(cfg(rollout_correction="seq_tis"))
  low = cfg(rollout_correction="seq_mis", rollout_rs_low=0.25, rollout_rs_high=3.0)
  assert correction.bounds(low) == (0.25, 3.0, 0.0)


@pytest.mark.parametrize(
  "keys,message",
  [
    ({"rollout_correction": "token_tis", "rollout_rs_high": 3.0}, "needs a rejecting"),
    ({"rollout_correction": "seq_tis", "rollout_rs_low": 0.3}, "needs a rejecting"),
    ({"rollout_correction": "seq_mis", "rollout_rs_low": 0.6, "rollout_rs_high": 1.5}, None),
    ({"rollout_correction": "seq_mis", "rollout_rs_low": 0.5, "rollout_rs_high": 1.0}, "> 1"),
    ({"rollout_correction": "geo_mis", "rollout_veto": 1.5}, "rollout_veto"),
    ({"rollout_correction": "seq_is"}, "geo_mis"),
  ],
)
def test_bad_correction_keys_fail_at_load(keys, message):
  if message is None:
    make_cfg(**keys)
    return
  with pytest.raises(ValueError, match=message):
    make_cfg(**keys)
