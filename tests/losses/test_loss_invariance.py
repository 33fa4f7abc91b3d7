"""Policy-loss invariances (METHODS §4 statements 13-15; research notes §7 pitfalls 1, 4, 5, 11):
micro-batch / row-partition additivity of loss, gradient and metrics; right-padding
invariance; on-policy ratio exactly 1; finite values for extreme inputs and empty masks.
All in float32, the dtype training uses.
"""

import jax
import numpy as np
import pytest

from grpo_jax import losses
from grpo_jax.config import defaults

KINDS = tuple(losses.LOSS_KINDS)
# The dual clip bounds the PPO surrogate; the other kinds have none (their config refuses it).
DUAL = {"grpo": 3.0, "dapo": 3.0, "gspo": 3.0}
AGGS = tuple(losses.AGGREGATIONS)


def make_inputs(seed=0, n_rows=8, width=7, spread=0.4):
  rng = np.random.default_rng(seed)
  lengths = rng.integers(1, width + 1, n_rows)
  lengths[3] = 0  # an all-masked row
  mask = (np.arange(width)[None] < lengths[:, None]).astype(np.float32)
  logp = -rng.uniform(0.05, 3.0, (n_rows, width)).astype(np.float32)
  old = (logp + spread * rng.normal(size=logp.shape)).astype(np.float32)
  adv = rng.normal(size=n_rows).astype(np.float32)
  ref = (logp + 0.5 * rng.normal(size=logp.shape)).astype(np.float32)
  ent = rng.uniform(0.0, 2.0, logp.shape).astype(np.float32)
  for x in (logp, old, ref, ent):
    x[mask == 0] = np.nan
  return logp, old, adv, mask, ref, ent


def make_cfg(**kw):
  """The typed ``loss`` group: the defaults with ``kw`` set."""
  return defaults({f"loss.{k}": v for k, v in kw.items()}).loss


def loss_and_grads(inputs, cfg, denoms):
  logp, old, adv, mask, ref, ent = inputs

  def f(lp, en):
    return losses.policy_loss(lp, old, adv, mask, cfg, denoms, losses.Terms(ref, en))

  (loss, aux), grads = jax.value_and_grad(f, argnums=(0, 1), has_aux=True)(logp, ent)
  return loss, aux, grads


@pytest.mark.parametrize("agg", AGGS)
@pytest.mark.parametrize("kind", KINDS)
def test_micro_batches_sum_to_the_full_batch(kind, agg):
  inputs = make_inputs(seed=1)
  cfg = make_cfg(
    kind=kind, aggregation=agg, dual_clip=DUAL.get(kind, 0.0), kl_coef=0.05, entropy_coef=0.01
  )
  denoms = losses.denominators(inputs[3], cfg)  # once, from the whole step's mask
  loss, aux, (g_logp, g_ent) = loss_and_grads(inputs, cfg, denoms)
  assert float(loss) != 0 and np.abs(g_logp).max() > 0
  perm = np.random.default_rng(0).permutation(len(inputs[2]))
  for parts in (1, 2, 4):
    acc_loss, acc_aux = 0.0, dict.fromkeys(aux, 0.0)
    acc_logp, acc_ent = np.zeros_like(g_logp), np.zeros_like(g_ent)
    for rows in np.split(perm, parts):
      mb_loss, mb_aux, (mb_logp, mb_ent) = loss_and_grads(
        tuple(x[rows] for x in inputs), cfg, denoms
      )
      acc_loss += float(mb_loss)
      acc_aux = {k: acc_aux[k] + float(v) for k, v in mb_aux.items()}
      acc_logp[rows] += mb_logp
      acc_ent[rows] += mb_ent
    assert acc_loss == pytest.approx(float(loss), rel=1e-6, abs=1e-7)
    np.testing.assert_allclose(acc_logp, g_logp, rtol=1e-6, atol=1e-6 * np.abs(g_logp).max())
    np.testing.assert_allclose(acc_ent, g_ent, rtol=1e-6, atol=1e-6 * np.abs(g_ent).max())
    for k, v in aux.items():
      assert acc_aux[k] == pytest.approx(float(v), rel=1e-6, abs=1e-7), k


def test_micro_batch_denominators_would_differ():
  # Guard for the test above: normalising by the micro-batch's own counts is NOT additive.
  inputs = make_inputs(seed=1)
  cfg = make_cfg()
  full = float(losses.policy_loss(*inputs[:4], cfg, losses.denominators(inputs[3], cfg))[0])
  local = 0.0
  for r in np.split(np.arange(8), 2):
    own = losses.denominators(inputs[3][r], cfg)
    local += float(losses.policy_loss(*(x[r] for x in inputs[:4]), cfg, own)[0])
  assert abs(local - full) > 1e-4


@pytest.mark.parametrize("agg", AGGS)
@pytest.mark.parametrize("kind", KINDS)
def test_right_padding_changes_nothing(kind, agg):
  inputs = make_inputs(seed=2)
  # T_max must be a constant for seq_mean_token_sum_norm (0 would mean "the padded width").
  cfg = make_cfg(
    kind=kind,
    aggregation=agg,
    dual_clip=DUAL.get(kind, 0.0),
    kl_coef=0.05,
    entropy_coef=0.01,
    norm_length=16,
  )
  loss, aux, (g_logp, g_ent) = loss_and_grads(inputs, cfg, losses.denominators(inputs[3], cfg))
  pad = 4
  padded = tuple(
    x if x.ndim == 1 else np.pad(x, ((0, 0), (0, pad)), constant_values=7.0 if i else -np.inf)
    for i, x in enumerate(inputs)
  )
  padded[3][:, -pad:] = 0  # mask
  p_loss, p_aux, (p_logp, p_ent) = loss_and_grads(padded, cfg, losses.denominators(padded[3], cfg))
  assert float(p_loss) == pytest.approx(float(loss), rel=1e-6)
  np.testing.assert_allclose(p_logp[:, :-pad], g_logp, rtol=1e-6, atol=1e-9)
  np.testing.assert_allclose(p_ent[:, :-pad], g_ent, rtol=1e-6, atol=1e-9)
  assert np.all(p_logp[:, -pad:] == 0) and np.all(p_ent[:, -pad:] == 0)
  for k in aux:
    assert float(p_aux[k]) == pytest.approx(float(aux[k]), rel=1e-6, abs=1e-9), k


@pytest.mark.parametrize("kind", KINDS)
def test_on_policy_ratio_is_exactly_one(kind):
  logp, _, adv, mask, _, _ = make_inputs(seed=3)
  cfg = make_cfg(kind=kind, dual_clip=DUAL.get(kind, 0.0))
  valid = mask > 0
  lp, old, a = losses.kinds.masked_inputs(logp, logp, adv, valid)
  ratio = losses.kinds.token_loss(lp, old, a, valid, cfg).ratio_NxT
  assert np.all(np.asarray(ratio)[valid] == 1.0)
  denoms = losses.denominators(mask, cfg)
  loss, aux = losses.policy_loss(logp, logp.copy(), adv, mask, cfg, denoms)
  assert float(aux["ratio/mean"]) == 1.0 and float(aux["ppo_kl"]) == 0.0
  for k in ("clip/low_frac", "clip/high_frac", "clip/dual_frac"):
    assert float(aux.get(k, 0.0)) == 0.0, k  # sapo logs no clip; without a dual clip, no dual
  # ρ = 1: the loss is −Σ m·A / Tok and its gradient is the plain policy gradient −A/Tok
  # (cispo's value is −A·logπ's, sapo's −A·2/τ's; their gradient is the same).
  tok = mask.sum()
  if kind not in ("cispo", "sapo"):
    assert float(loss) == pytest.approx(-(adv[:, None] * mask).sum() / tok, rel=1e-6)
  grad = jax.grad(lambda lp: losses.policy_loss(lp, logp, adv, mask, cfg, denoms)[0])(logp)
  np.testing.assert_allclose(grad, np.where(valid, -adv[:, None] / tok, 0), rtol=1e-6)


@pytest.mark.parametrize("agg", AGGS)
@pytest.mark.parametrize("kind", KINDS)
def test_huge_log_prob_gaps_stay_finite(kind, agg):
  logp, old, adv, mask, ref, ent = make_inputs(seed=4)
  rng = np.random.default_rng(5)
  old = (logp + rng.uniform(-1e3, 1e3, logp.shape)).astype(np.float32)
  ref = (logp + rng.uniform(-1e3, 1e3, logp.shape)).astype(np.float32)
  adv = (10 * rng.normal(size=adv.shape)).astype(np.float32)
  for dual in {0.0, DUAL.get(kind, 0.0)}:
    cfg = make_cfg(kind=kind, aggregation=agg, kl_coef=0.1, entropy_coef=0.01, dual_clip=dual)
    loss, aux, grads = loss_and_grads(
      (logp, old, adv, mask, ref, ent), cfg, losses.denominators(mask, cfg)
    )
    assert np.isfinite(float(loss))
    assert all(np.isfinite(float(v)) for v in aux.values())
    assert all(np.all(np.isfinite(g)) for g in grads)


def test_fully_masked_batch_is_zero_and_finite():
  logp, old, adv, mask, ref, ent = make_inputs(seed=6)
  mask = np.zeros_like(mask)
  for kind in KINDS:
    for agg in AGGS:
      cfg = make_cfg(
        kind=kind, aggregation=agg, dual_clip=DUAL.get(kind, 0.0), kl_coef=0.1, entropy_coef=0.1
      )
      loss, aux, grads = loss_and_grads(
        (logp, old, adv, mask, ref, ent), cfg, losses.denominators(mask, cfg)
      )
      assert float(loss) == 0.0 and all(float(v) == 0.0 for v in aux.values())
      assert all(np.all(np.asarray(g) == 0.0) for g in grads)


def test_padded_row_with_nan_advantage_contributes_nothing():
  logp, old, adv, mask, ref, ent = make_inputs(seed=7)
  cfg = make_cfg(kind="gspo", aggregation="seq_mean_token_mean")
  denoms = losses.denominators(mask, cfg)
  base, _, (g_base, _) = loss_and_grads((logp, old, adv, mask, ref, ent), cfg, denoms)
  adv = adv.copy()
  adv[3] = np.nan  # row 3 is all-masked
  loss, _, (g, _) = loss_and_grads((logp, old, adv, mask, ref, ent), cfg, denoms)
  assert float(loss) == float(base)
  np.testing.assert_array_equal(g, g_base)
