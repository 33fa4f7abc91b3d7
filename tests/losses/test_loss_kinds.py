"""CISPO, SAPO and GMPO (``loss.kind``): values, gradients and clip fractions on hand-computed
rows (clip active and not), and against a NumPy transcription of verl's
``compute_policy_loss_cispo`` / ``_sapo`` / ``_geo_mean`` (``verl/trainer/ppo/core_algos.py``,
``tests/losses/verl_policy_numpy.py``) on random rows: values to 1e-10 and gradients against
central differences of verl's value, in float64."""

import math

import jax
import numpy as np
import pytest

from grpo_jax import losses
from grpo_jax.config import base_config, experiment
from tests.losses import verl_policy_numpy as verl

E = math.exp
sigmoid = lambda x: 1.0 / (1.0 + math.exp(-x))


def make_cfg(**kw):
  cfg = base_config().loss
  for k, v in kw.items():
    cfg[k] = v
  return experiment.of(cfg, "loss")


def loss_grad_aux(logp, old, adv, mask, cfg):
  """(loss, d loss / d logp, aux) of ``policy_loss`` in float64."""
  logp, old, adv, mask = (np.asarray(x, np.float64) for x in (logp, old, adv, mask))
  with jax.enable_x64(True):
    denoms = losses.denominators(mask, cfg)
    f = lambda lp: losses.policy_loss(lp, old, adv, mask, cfg, denoms)
    (loss, aux), grad = jax.value_and_grad(f, has_aux=True)(logp)
    return float(loss), np.asarray(grad), {k: float(v) for k, v in aux.items()}


def test_defaults_follow_the_papers():
  assert losses.resolve_clip(make_cfg(kind="cispo")) == (1.0, 4.0)  # MiniMax-M1; ε_max 5
  assert losses.resolve_clip(make_cfg(kind="gmpo")) == (0.4, 0.4)  # (e^-0.4, e^0.4)
  cfg = make_cfg(kind="sapo")
  assert (cfg.sapo_tau_pos, cfg.sapo_tau_neg) == (1.0, 1.05)
  assert losses.resolve_clip(make_cfg(kind="gmpo", clip_low=1.5)) == (1.5, 0.4)  # log space


def test_cispo_by_hand():
  # One row, log-ratios 0.5, -0.1, 2.0, A = 2, token_mean: weights e^0.5, e^-0.1 and
  # e^2 = 7.39 truncated at 1 + ε_high = 5; ℓ_t = −w·A·logπ_t, ∂ℓ_t/∂logπ_t = −w·A (/3 tokens).
  logp = np.array([[-1.0, -2.0, -0.5]])
  old = logp - np.array([[0.5, -0.1, 2.0]])
  w = np.array([E(0.5), E(-0.1), 5.0])
  loss, grad, aux = loss_grad_aux(logp, old, [2.0], np.ones((1, 3)), make_cfg(kind="cispo"))
  assert loss == pytest.approx(-2.0 * (w * logp[0]).sum() / 3, rel=1e-12)
  np.testing.assert_allclose(grad[0], -2.0 * w / 3, rtol=1e-12)
  assert aux["clip/high_frac"] == pytest.approx(1 / 3) and aux["clip/low_frac"] == 0.0
  assert aux["ratio/mean"] == pytest.approx((E(0.5) + E(-0.1) + E(2.0)) / 3)
  # A lower bound: ε_low = 0.2 lifts e^-0.5 = 0.61 to 0.8 (the gradient keeps flowing).
  old = logp - np.array([[0.5, -0.5, 0.0]])
  w = np.array([E(0.5), 0.8, 1.0])
  loss, grad, aux = loss_grad_aux(
    logp, old, [-1.0], np.ones((1, 3)), make_cfg(kind="cispo", clip_low=0.2)
  )
  assert loss == pytest.approx((w * logp[0]).sum() / 3, rel=1e-12)
  np.testing.assert_allclose(grad[0], w / 3, rtol=1e-12)
  assert aux["clip/low_frac"] == pytest.approx(1 / 3) and aux["clip/high_frac"] == 0.0


def test_sapo_by_hand():
  # Row 0: A = +1 (τ = 1), log-ratios 0 and 0.5; row 1: A = −1 (τ = 1.05), log-ratio 0.5 and
  # a masked token. ℓ = −A·σ(τ(ρ − 1))·4/τ, ∂ℓ/∂logπ = −A·4σ(1 − σ)·ρ; seq_mean_token_mean.
  logp = np.array([[-1.0, -1.0], [-2.0, np.nan]])
  old = np.array([[-1.0, -1.5], [-2.5, np.nan]])
  mask = np.array([[1.0, 1.0], [1.0, 0.0]])
  r = E(0.5)
  gate = lambda rho, tau: sigmoid(tau * (rho - 1)) * 4 / tau
  slope = lambda rho, tau: 4 * sigmoid(tau * (rho - 1)) * (1 - sigmoid(tau * (rho - 1))) * rho
  cfg = make_cfg(kind="sapo", aggregation="seq_mean_token_mean")
  loss, grad, aux = loss_grad_aux(logp, old, [1.0, -1.0], mask, cfg)
  assert gate(1.0, 1.0) == 2.0 and slope(1.0, 1.05) == 1.0  # on-policy: the plain gradient
  want = ((-gate(1.0, 1.0) - gate(r, 1.0)) / 2 + gate(r, 1.05)) / 2
  assert loss == pytest.approx(want, rel=1e-12)
  want_grad = [[-slope(1.0, 1.0) / 4, -slope(r, 1.0) / 4], [slope(r, 1.05) / 2, 0.0]]
  np.testing.assert_allclose(grad, want_grad, rtol=1e-12)
  assert "clip/low_frac" not in aux and "clip/high_frac" not in aux  # no clip to count
  # τ_neg moves only the negative row, τ_pos only the positive one.
  for key, row in (("sapo_tau_neg", 1), ("sapo_tau_pos", 0)):
    _, g2, _ = loss_grad_aux(logp, old, [1.0, -1.0], mask, make_cfg(**{**cfg.to_dict(), key: 2.0}))
    assert not np.allclose(g2[row], grad[row]) and np.allclose(g2[1 - row], grad[1 - row])


def test_gmpo_by_hand():
  # Both rows log-ratios 0.1, 0.6, -0.7 and ε = 0.4. A = +1 cuts only the top: d̃ = 0.1, 0.4,
  # -0.7, R = e^(-0.2/3), the clipped token's gradient 0. A = −1 cuts only the bottom: d̃ = 0.1,
  # 0.6, -0.4, R = e^0.1. ℓ_i = −A_i·R_i; seq_mean_token_mean over 2 rows; ∂/∂logπ_t = −A·R/(3·2).
  logp = np.array([[-1.0, -2.0, -3.0], [-1.0, -2.0, -3.0]])
  old = logp - np.array([0.1, 0.6, -0.7])
  r_pos, r_neg = E(-0.2 / 3), E(0.1)
  cfg = make_cfg(kind="gmpo", aggregation="seq_mean_token_mean")
  loss, grad, aux = loss_grad_aux(logp, old, [1.0, -1.0], np.ones((2, 3)), cfg)
  assert loss == pytest.approx((-r_pos + r_neg) / 2, rel=1e-12)
  np.testing.assert_allclose(grad[0], -r_pos / 6 * np.array([1, 0, 1]), rtol=1e-12, atol=1e-15)
  np.testing.assert_allclose(grad[1], r_neg / 6 * np.array([1, 1, 0]), rtol=1e-12, atol=1e-15)
  assert aux["clip/high_frac"] == pytest.approx(1 / 6) and aux["clip/low_frac"] == 1 / 6
  assert aux["ratio/mean"] == pytest.approx((r_pos + r_neg) / 2)
  # Inside the range (ε = 1): the plain geometric mean, every token's gradient alive.
  loss, grad, _ = loss_grad_aux(
    logp, old, [1.0, -1.0], np.ones((2, 3)), make_cfg(**{**cfg.to_dict(), "clip_low": 1.0})
  )
  _, grad_hi, _ = loss_grad_aux(
    logp, old, [1.0, -1.0], np.ones((2, 3)), make_cfg(**{**cfg.to_dict(), "clip_high": 1.0})
  )
  assert np.all(grad[1] != 0) and np.all(grad_hi[0] != 0)


def random_rows(seed, n_rows=32, width=12, spread=1.5):
  rng = np.random.default_rng(seed)
  lengths = rng.integers(1, width + 1, n_rows)
  mask = (np.arange(width)[None] < lengths[:, None]).astype(np.float64)
  logp = -rng.uniform(0.05, 4.0, (n_rows, width))
  old = logp - rng.uniform(-spread, spread, (n_rows, width))
  adv = rng.normal(size=n_rows)
  adv[::7] = 0.0  # A = 0 rows (sgn 0 in GMPO)
  return logp, old, adv, mask


# verl divides a row's token sum by n_i + 1e-8 (agg_loss, geo_mean): 1e-8 / n_i relative.
VERL_ROW_EPS = 2e-8


@pytest.mark.parametrize("agg", ["token_mean", "seq_mean_token_mean"])
@pytest.mark.parametrize("eps", [(1.0, 4.0), (0.2, 0.28)])
def test_cispo_equals_verl(eps, agg):
  logp, old, adv, mask = random_rows(0, spread=2.5)
  mode = agg.replace("_", "-")
  adv_NxT = np.broadcast_to(adv[:, None], logp.shape)
  want, clipfrac = verl.cispo(old, logp, adv_NxT, mask, *eps, mode)
  cfg = make_cfg(kind="cispo", aggregation=agg, clip_low=eps[0], clip_high=eps[1])
  loss, grad, aux = loss_grad_aux(logp, old, adv, mask, cfg)
  assert loss == pytest.approx(want, rel=1e-10 if agg == "token_mean" else VERL_ROW_EPS)
  assert aux["clip/low_frac"] + aux["clip/high_frac"] == pytest.approx(clipfrac, rel=1e-12)
  assert 0 < clipfrac < 1
  # torch's gradient: the clipped weight held (detached), the log-prob term differentiated.
  f = lambda lp: verl.cispo(old, lp, adv_NxT, mask, *eps, mode, weight_from=logp)[0]
  np.testing.assert_allclose(grad, verl.central_differences(f, logp, mask), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("tau", [(1.0, 1.05), (0.5, 2.0)])
def test_sapo_equals_verl(tau):
  logp, old, adv, mask = random_rows(1)
  adv_NxT = np.broadcast_to(adv[:, None], logp.shape)
  cfg = make_cfg(
    kind="sapo", aggregation="seq_mean_token_mean", sapo_tau_pos=tau[0], sapo_tau_neg=tau[1]
  )
  loss, grad, _ = loss_grad_aux(logp, old, adv, mask, cfg)
  assert loss == pytest.approx(verl.sapo(old, logp, adv_NxT, mask, *tau), rel=VERL_ROW_EPS)
  f = lambda lp: verl.sapo(old, lp, adv_NxT, mask, *tau)
  np.testing.assert_allclose(grad, verl.central_differences(f, logp, mask), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("eps", [(0.4, 0.4), (0.1, 0.3)])
def test_gmpo_equals_verl(eps):
  # verl averages −A_i·R_i over rows: seq_mean_token_mean here (every row has a token).
  logp, old, adv, mask = random_rows(2, spread=0.8)
  adv_NxT = np.broadcast_to(adv[:, None], logp.shape)
  want, high, low = verl.geo_mean(old, logp, adv_NxT, mask, *eps)
  cfg = make_cfg(kind="gmpo", aggregation="seq_mean_token_mean", clip_low=eps[0], clip_high=eps[1])
  loss, grad, aux = loss_grad_aux(logp, old, adv, mask, cfg)
  assert loss == pytest.approx(want, rel=VERL_ROW_EPS)
  f = lambda lp: verl.geo_mean(old, lp, adv_NxT, mask, *eps)[0]
  np.testing.assert_allclose(grad, verl.central_differences(f, logp, mask), rtol=1e-6, atol=1e-9)
  # verl's fractions count every clamped log-ratio by the sign of A; ours only those whose
  # gradient the clip removes (the top for A > 0, the bottom for A < 0).
  d = logp - old
  valid = mask > 0
  ours_high = ((d > eps[1]) & (adv[:, None] > 0) & valid).sum() / valid.sum()
  ours_low = ((d < -eps[0]) & (adv[:, None] < 0) & valid).sum() / valid.sum()
  assert aux["clip/high_frac"] == pytest.approx(ours_high) and aux["clip/low_frac"] == ours_low
  assert 0 < ours_high < high and 0 < ours_low < low


def test_gmpo_token_mean_weighs_rows_by_length():
  # The kind never picks the aggregation: token_mean gives row i the weight n_i / Tok.
  logp, old, adv, mask = random_rows(3, spread=0.3)
  seq, _, _ = loss_grad_aux(logp, old, adv, mask, make_cfg(kind="gmpo"))
  with jax.enable_x64(True):
    lp, o, a = losses.kinds.masked_inputs(logp, old, adv, mask > 0)
    r_N = np.asarray(losses.kinds.token_loss(lp, o, a, mask > 0, make_cfg(kind="gmpo")).ratio_NxT)
  n_N = mask.sum(1)
  assert seq == pytest.approx(np.sum(-adv * r_N[:, 0] * n_N) / n_N.sum(), rel=1e-10)
