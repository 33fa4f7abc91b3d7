"""The entropy controls inside the jitted update: each optimizer step selects its tokens once,
over all of its rows, so micro-batches give the full-batch update (Clip-Cov at μ = 1, KL-Cov at
μ = 2 where it acts); the control changes the update and logs the share it touched."""

import numpy as np
import pytest

# A band every token's covariance is in, so the draw's size is known: k = int(r·n).
CLIP_COV = (
  "loss.entropy_control=clip_cov",
  "loss.clip_cov_lb=-100",
  "loss.clip_cov_ub=100",
  "loss.clip_cov_ratio=0.1",
)
KL_COV = ("loss.entropy_control=kl_cov", "loss.kl_cov_ratio=0.05", "loss.num_minibatches=2")


def test_clip_cov_micro_batches_give_the_full_batch_update(synthetic_batch, rel_diff, sgd_grad):
  batch = synthetic_batch()
  g_full, m_full = sgd_grad(CLIP_COV, batch)
  g_mb, m_mb = sgd_grad((*CLIP_COV, "loss.micro_batch_size=8"), batch)
  assert rel_diff(g_full, g_mb) < 1e-6
  for key in ("loss/total", "loss/policy", "entropy/controlled_frac", "loss/entropy"):
    np.testing.assert_allclose(m_mb[key], m_full[key], rtol=1e-5, atol=1e-7)
  # At μ = 1 no token is clipped, so k = int(0.1·n) of the n scored tokens are dropped.
  n = int((batch.completion_mask_NxT * batch.loss_mask_N[:, None]).sum())
  assert m_full["entropy/controlled_frac"] == pytest.approx(int(0.1 * n) / n, rel=1e-6)
  g_none, m_none = sgd_grad(("loss.micro_batch_size=8",), batch)
  assert rel_diff(g_none, g_mb) > 1e-2
  assert "entropy/controlled_frac" not in m_none  # no control, no share


def test_kl_cov_micro_batches_give_the_full_batch_update(synthetic_batch, rel_diff, sgd_grad):
  """Each 16-row minibatch in one pass against micro-batches of 8 and 4. One pass is 16 rows,
  the shape of the old log-probs' pass, so the first step's log ρ is 0 in both: elsewhere it
  is rounding noise there, whose sign |log ρ|'s gradient takes (as in verl)."""
  batch = synthetic_batch()
  g_full, m_full = sgd_grad((*KL_COV, "loss.micro_batch_size=16"), batch)
  for rows in (8, 4):
    g_mb, m_mb = sgd_grad((*KL_COV, f"loss.micro_batch_size={rows}"), batch)
    assert rel_diff(g_full, g_mb) < 1e-5
    for key in ("loss/total", "loss/policy", "entropy/controlled_frac", "ppo_kl"):
      np.testing.assert_allclose(m_mb[key], m_full[key], rtol=1e-5, atol=1e-7)
  assert m_full["entropy/controlled_frac"] > 0 and m_full["ppo_kl"] != 0.0
  # The penalty acts on the second minibatch (π_θ has moved): the update is not the plain one.
  g_none, _ = sgd_grad(("loss.num_minibatches=2", "loss.micro_batch_size=16"), batch)
  assert rel_diff(g_none, g_full) > 1e-3


def test_the_share_is_logged_only_with_a_control(synthetic_batch, sgd_grad):
  """The update's metrics hold the share with a control only, and no clip fractions for SAPO
  (whose gate has no clip: they would be 0 by construction)."""
  batch = synthetic_batch()
  for overrides, logged in ((CLIP_COV, True), (KL_COV, True), ((), False)):
    _, m = sgd_grad((*overrides, "loss.micro_batch_size=16"), batch)
    assert ("entropy/controlled_frac" in m) == logged and "loss/entropy" in m
  _, m = sgd_grad(("loss.kind=sapo",), batch)
  assert "clip/low_frac" not in m and "clip/high_frac" not in m and "loss/policy" in m
