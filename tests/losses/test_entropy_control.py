"""Clip-Cov and KL-Cov (``loss.entropy_control``): the selected tokens on hand-built rows where
they are known, the changed loss and gradient there, and agreement with a NumPy transcription of
verl's ``compute_policy_loss_clip_cov`` / ``compute_policy_loss_kl_cov``
(``verl/trainer/ppo/core_algos.py``, ``tests/losses/verl_policy_numpy.py``) on random rows."""

import jax
import numpy as np
import pytest

from grpo_jax import losses
from grpo_jax.config import base_config, experiment, recipes
from grpo_jax.losses import entropy_control
from tests.losses import verl_policy_numpy as verl

KEY = jax.random.PRNGKey(0)
# The loss reads no clip where verl's KL-Cov has none: a floor of 0 and a ceiling above e^20.
NO_CLIP = {"clip_low": 1.0, "clip_high": recipes.NO_CEILING}


def make_cfg(**kw):
  cfg = base_config().loss
  for k, v in kw.items():
    cfg[k] = v
  return experiment.of(cfg, "loss")


def run(logp, old, adv, mask, cfg, key=KEY):
  """(selection, loss, d loss / d logp, aux) in float64: the selection on the whole batch."""
  logp, old, adv, mask = (np.asarray(x, np.float64) for x in (logp, old, adv, mask))
  with jax.enable_x64(True):
    control = entropy_control.select(logp, old, adv, mask, cfg, key)
    denoms = losses.denominators(mask, cfg)
    terms = losses.Terms(control_NxT=control)
    f = lambda lp: losses.policy_loss(lp, old, adv, mask, cfg, denoms, terms)
    (loss, aux), grad = jax.value_and_grad(f, has_aux=True)(logp)
    return np.asarray(control), float(loss), np.asarray(grad), {k: float(v) for k, v in aux.items()}


def hand_rows():
  """Two rows of 4 tokens, A = +1 and −1 (mean 0), log-probs −0.5, −1, −2, −4.5 in both (mean
  −2): cov = [1.5, 1, 0, −2.5] and [−1.5, −1, 0, 2.5]."""
  logp = np.array([[-0.5, -1.0, -2.0, -4.5], [-0.5, -1.0, -2.0, -4.5]])
  d = np.array([[0.1, 0.15, -0.1, 0.0], [0.05, 0.0, -0.15, -0.1]])  # inside grpo's ±0.2
  return logp, logp - d, np.array([1.0, -1.0]), np.ones((2, 4)), d


def test_covariance_by_hand():
  logp, _, adv, mask, _ = hand_rows()
  cov = entropy_control.covariance_NxT(logp, adv[:, None] * mask, mask > 0)
  np.testing.assert_allclose(cov, [[1.5, 1.0, 0.0, -2.5], [-1.5, -1.0, 0.0, 2.5]])


def test_kl_cov_by_hand():
  # r = 0.25 of 8 tokens: the 2 largest covariances, (1, 3) = 2.5 and (0, 0) = 1.5. Their terms
  # gain β·|log ρ|: value and gradient −A·ρ/8 + β·sign(log ρ)/8 there, −A·ρ/8 elsewhere.
  logp, old, adv, mask, d = hand_rows()
  cfg = make_cfg(entropy_control="kl_cov", kl_cov_ratio=0.25, kl_cov_coef=2.0, num_iterations=2)
  control, loss, grad, aux = run(logp, old, adv, mask, cfg)
  chosen = np.zeros((2, 4), bool)
  chosen[1, 3] = chosen[0, 0] = True
  np.testing.assert_array_equal(control, chosen)
  base = -adv[:, None] * np.exp(d)
  assert loss == pytest.approx((base.sum() + 2.0 * (abs(d[1, 3]) + abs(d[0, 0]))) / 8, rel=1e-12)
  want = (base + 2.0 * np.sign(d) * chosen) / 8
  np.testing.assert_allclose(grad, want, rtol=1e-12)
  assert aux["entropy/controlled_frac"] == 2 / 8
  # Off-policy tokens only: at π_old = π_θ the penalty and its gradient are 0.
  _, loss0, grad0, _ = run(logp, logp, adv, mask, cfg)
  assert loss0 == pytest.approx(-adv.sum() * 4 / 8) and np.allclose(grad0, -adv[:, None] / 8)


def test_clip_cov_by_hand():
  # Band (1, 5): candidates (0, 0) = 1.5 and (1, 3) = 2.5 ((0, 1) = 1 is on the bound). With
  # r = 0.25 (k = 2) both are dropped: ℓ = 0 and no gradient there, the rest unchanged.
  logp, old, adv, mask, d = hand_rows()
  cfg = make_cfg(entropy_control="clip_cov", clip_cov_ratio=0.25)
  control, loss, grad, aux = run(logp, old, adv, mask, cfg)
  chosen = np.zeros((2, 4), bool)
  chosen[1, 3] = chosen[0, 0] = True
  np.testing.assert_array_equal(control, chosen)
  base = -adv[:, None] * np.exp(d)
  assert loss == pytest.approx(base[~chosen].sum() / 8, rel=1e-12)
  np.testing.assert_allclose(grad, np.where(chosen, 0.0, base / 8), rtol=1e-12)
  assert aux["entropy/controlled_frac"] == 2 / 8
  # A token the PPO clip already cut is left to it: (0, 0) at ρ = e^0.5 > 1.2 with A > 0.
  old[0, 0] = logp[0, 0] - 0.5
  control, loss, grad, aux = run(logp, old, adv, mask, cfg)
  chosen[0, 0] = False
  np.testing.assert_array_equal(control, chosen)
  assert loss == pytest.approx((base[~chosen].sum() - base[0, 0] - 1.2) / 8, rel=1e-12)
  assert grad[0, 0] == 0.0 and grad[1, 3] == 0.0 and aux["entropy/controlled_frac"] == 1 / 8
  assert aux["clip/high_frac"] == 1 / 8


def test_count_is_verls_integer_count():
  # int(r·n) in float64, at least 1; a float32 product gives 1 for 10000 × 2e-4 and is off by
  # one or more past 2^22 (0.3 × (2^23 + 3) = 2516583.3).
  for n in (0, 1, 4999, 5000, 9999, 10000, 10001, 123456, 2**23 + 3):
    for r in (2e-4, 2e-3, 0.02, 0.1, 0.3, 1.0):
      assert int(entropy_control.count(n, r)) == max(int(r * n), 1), (n, r)


def random_rows(seed, n_rows=24, width=10):
  rng = np.random.default_rng(seed)
  lengths = rng.integers(1, width + 1, n_rows)
  mask = (np.arange(width)[None] < lengths[:, None]).astype(np.float64)
  logp = -rng.uniform(0.05, 5.0, (n_rows, width))
  old = logp - rng.uniform(-0.5, 0.5, (n_rows, width))
  adv = 2.0 * rng.normal(size=n_rows)
  return logp, old, adv, mask


def test_clip_cov_draws_k_of_the_candidates():
  logp, old, adv, mask = random_rows(0)
  cfg = make_cfg(entropy_control="clip_cov", clip_cov_ratio=0.05, clip_cov_lb=0.5)
  everyone = make_cfg(entropy_control="clip_cov", clip_cov_ratio=1.0, clip_cov_lb=0.5)
  candidates = run(logp, old, adv, mask, everyone)[0]
  k = max(int(0.05 * mask.sum()), 1)
  draws = [run(logp, old, adv, mask, cfg, jax.random.PRNGKey(s))[0] for s in range(4)]
  assert candidates.sum() > k
  for chosen in draws:
    assert chosen.sum() == k and np.all(candidates[chosen])
  assert len({c.tobytes() for c in draws}) > 1  # the key draws them
  np.testing.assert_array_equal(run(logp, old, adv, mask, cfg, jax.random.PRNGKey(2))[0], draws[2])


@pytest.mark.parametrize("agg", ["token_mean", "seq_mean_token_mean"])
def test_clip_cov_equals_verl(agg):
  logp, old, adv, mask = random_rows(1)
  old[::3, :2] = logp[::3, :2] - 0.6  # some tokens outside the clip range
  adv_NxT = np.broadcast_to(adv[:, None], logp.shape).copy()
  eps, band = (0.2, 0.28), (0.5, 3.0)
  keys = {"clip_cov_lb": band[0], "clip_cov_ub": band[1], "aggregation": agg, "kind": "dapo"}
  cfg = make_cfg(entropy_control="clip_cov", clip_cov_ratio=0.1, **keys)
  # verl's candidates are ours: with r = 1 every candidate is dropped.
  _, candidates = verl.clip_cov_corr(old, logp, adv_NxT, mask, *eps, 0.1, *band)
  everyone = make_cfg(entropy_control="clip_cov", clip_cov_ratio=1.0, **keys)
  np.testing.assert_array_equal(run(logp, old, adv, mask, everyone)[0], candidates)
  # k = int(0.1·n) of them drawn; verl's loss with those tokens' corr = 0 is ours.
  chosen, loss, grad, aux = run(logp, old, adv, mask, cfg)
  assert chosen.sum() == min(int(0.1 * mask.sum()), candidates.sum()) > 0
  perm = np.argsort(~chosen[candidates], kind="stable")  # verl's draw, put first
  corr, _ = verl.clip_cov_corr(old, logp, adv_NxT, mask, *eps, 0.1, *band, perm=perm)
  np.testing.assert_array_equal(corr == 0, chosen)
  want, clipfrac = verl.clip_cov(old, logp, adv_NxT, mask, *eps, corr, agg.replace("_", "-"))
  assert loss == pytest.approx(want, rel=1e-10 if agg == "token_mean" else 2e-8)
  assert aux["entropy/controlled_frac"] == pytest.approx(clipfrac, rel=1e-12)
  f = lambda lp: verl.clip_cov(old, lp, adv_NxT, mask, *eps, corr, agg.replace("_", "-"))[0]
  np.testing.assert_allclose(grad, verl.central_differences(f, logp, mask), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("ratio", [2e-4, 0.05, 0.3])
def test_kl_cov_equals_verl(ratio):
  logp, old, adv, mask = random_rows(2)
  adv_NxT = np.broadcast_to(adv[:, None], logp.shape).copy()
  cfg = make_cfg(
    entropy_control="kl_cov", kl_cov_ratio=ratio, kl_cov_coef=0.7, num_iterations=2, **NO_CLIP
  )
  chosen, loss, grad, aux = run(logp, old, adv, mask, cfg)
  index = verl.kl_cov_index(logp, adv_NxT, mask, ratio)
  np.testing.assert_array_equal(np.flatnonzero(chosen), np.sort(index))
  assert aux["entropy/controlled_frac"] == max(int(ratio * mask.sum()), 1) / mask.sum()
  want = verl.kl_cov(old, logp, adv_NxT, mask, index, 0.7, "token-mean")
  assert loss == pytest.approx(want, rel=1e-10)
  f = lambda lp: verl.kl_cov(old, lp, adv_NxT, mask, index, 0.7, "token-mean")
  np.testing.assert_allclose(grad, verl.central_differences(f, logp, mask), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("control", ["clip_cov", "kl_cov"])
def test_row_parts_with_the_steps_selection_sum_to_the_step(control):
  logp, old, adv, mask = (x.astype(np.float32) for x in random_rows(3))
  extra = {"clip_cov_lb": 0.2, "clip_cov_ratio": 0.1}
  extra = extra if control == "clip_cov" else {"kl_cov_ratio": 0.05}
  cfg = make_cfg(
    entropy_control=control, num_iterations=2, aggregation="seq_mean_token_mean", **extra
  )
  control_NxT = entropy_control.select(logp, old, adv, mask, cfg, KEY)
  assert np.asarray(control_NxT).sum() > 1
  denoms = losses.denominators(mask, cfg)

  def loss_grad(rows):
    f = lambda lp: losses.policy_loss(
      lp, old[rows], adv[rows], mask[rows], cfg, denoms, losses.Terms(control_NxT=control_NxT[rows])
    )
    (loss, aux), grad = jax.value_and_grad(f, has_aux=True)(logp[rows])
    return float(loss), np.asarray(grad), aux

  full, g_full, aux_full = loss_grad(slice(None))
  parts = [loss_grad(slice(a, a + 6)) for a in range(0, 24, 6)]
  assert sum(p[0] for p in parts) == pytest.approx(full, rel=1e-5)
  np.testing.assert_allclose(np.concatenate([p[1] for p in parts]), g_full, rtol=1e-5, atol=1e-8)
  frac = sum(float(p[2]["entropy/controlled_frac"]) for p in parts)
  assert frac == pytest.approx(float(aux_full["entropy/controlled_frac"]), rel=1e-6)


def test_a_control_without_its_selection_raises():
  logp, old, adv, mask = random_rows(4)
  cfg = make_cfg(entropy_control="clip_cov")
  with pytest.raises(ValueError, match="entropy_control = 'clip_cov' needs Terms.control_NxT"):
    losses.policy_loss(logp, old, adv, mask, cfg, losses.denominators(mask, cfg))
  none = make_cfg()
  assert not np.asarray(entropy_control.select(logp, old, adv, mask, none, KEY)).any()
